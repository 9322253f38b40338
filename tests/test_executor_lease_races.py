"""Claiming a lease while a rival runner changes it between our create, read and takeover.

The rival's writes are real writes on local storage; only their timing is forced, by running them
just before our own storage calls (no real scheduler interleaves them this reliably).
"""

from __future__ import annotations

import json
import time

import pytest

from marin.execution import lease as lease_module
from marin.execution.lease import ACQUIRE_ATTEMPTS, Lease, LeaseContention, LeaseHeld, new_owner_id, try_acquire
from marin.storage import create_if_absent, delete_if_unchanged, read_with_version, replace_if_unchanged


def rival_payload(heartbeat: float) -> bytes:
    return json.dumps({"owner": "rival", "host": "elsewhere", "pid": 1, "heartbeat": heartbeat, "acquired": 0}).encode()


def release(path: str) -> None:
    current = read_with_version(path)
    if current is not None:
        delete_if_unchanged(path, current.version)


def test_a_lease_released_once_between_create_and_read_is_claimed_on_the_next_try(tmp_path, monkeypatch):
    path = str(tmp_path / "step" / ".executor_lease")
    create_if_absent(path, rival_payload(time.time()))
    races = []

    def read_after_the_rival_released(p):
        if not races:
            races.append(p)
            release(p)
        return read_with_version(p)

    monkeypatch.setattr(lease_module, "read_with_version", read_after_the_rival_released)
    claim = try_acquire(path, new_owner_id())
    assert isinstance(claim, Lease) and races == [path]
    assert json.loads(read_with_version(path).data)["owner"] == claim.owner


def test_a_lease_that_changes_under_every_try_fails_naming_its_path(tmp_path, monkeypatch):
    path = str(tmp_path / "step" / ".executor_lease")
    creates = []

    def create_after_the_rival_claimed(p, data):
        creates.append(p)
        create_if_absent(p, rival_payload(time.time()))
        return create_if_absent(p, data)

    def read_after_the_rival_released(p):
        release(p)
        return read_with_version(p)

    monkeypatch.setattr(lease_module, "create_if_absent", create_after_the_rival_claimed)
    monkeypatch.setattr(lease_module, "read_with_version", read_after_the_rival_released)
    with pytest.raises(LeaseContention, match=f"lease {path}: changed under each of {ACQUIRE_ATTEMPTS} tries"):
        try_acquire(path, new_owner_id())
    assert len(creates) == ACQUIRE_ATTEMPTS


def test_losing_the_takeover_of_a_stale_lease_reports_the_new_holder(tmp_path, monkeypatch):
    path = str(tmp_path / "step" / ".executor_lease")
    create_if_absent(path, rival_payload(time.time() - 3600))

    def replace_after_the_rival_took_over(p, data, version):
        replace_if_unchanged(p, rival_payload(time.time()), version)
        return replace_if_unchanged(p, data, version)

    monkeypatch.setattr(lease_module, "replace_if_unchanged", replace_after_the_rival_took_over)
    stale_for_us = {read_with_version(path).version: time.monotonic() - 3600}
    claim = try_acquire(path, new_owner_id(), stale_for_us)
    assert isinstance(claim, LeaseHeld) and claim.owner == "rival" and claim.age_s < 60


class SkewedClock:
    """A taker's clock: monotonic time advanced by hand, wall time `skew_s` off the holder's."""

    def __init__(self, skew_s: float):
        self.now = 1000.0
        self.skew_s = skew_s

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return time.time() + self.skew_s


@pytest.mark.parametrize("skew_s", [300.0, -300.0])
def test_a_heartbeating_lease_is_never_taken_whatever_the_clocks_skew(tmp_path, monkeypatch, skew_s):
    monkeypatch.setenv("MARIN_LEASE_TIMEOUT_S", "60")
    path = str(tmp_path / "step" / ".executor_lease")
    version = create_if_absent(path, rival_payload(time.time()))
    clock, seen = SkewedClock(skew_s), {}
    for _ in range(10):
        claim = try_acquire(path, new_owner_id(), seen, clock)
        assert isinstance(claim, LeaseHeld) and claim.owner == "rival"
        clock.now += 40
        version = replace_if_unchanged(path, rival_payload(time.time()), version)


@pytest.mark.parametrize("skew_s", [300.0, -300.0])
def test_a_dead_lease_is_taken_once_the_taker_saw_it_unchanged_for_the_timeout(tmp_path, monkeypatch, skew_s):
    monkeypatch.setenv("MARIN_LEASE_TIMEOUT_S", "60")
    path = str(tmp_path / "step" / ".executor_lease")
    create_if_absent(path, rival_payload(time.time() + skew_s))
    clock, seen = SkewedClock(skew_s), {}
    for _ in range(3):
        assert isinstance(try_acquire(path, new_owner_id(), seen, clock), LeaseHeld)
        clock.now += 20
    clock.now += 1
    claim = try_acquire(path, new_owner_id(), seen, clock)
    assert isinstance(claim, Lease) and claim.took_over


IDENTITY = (
    "import json; from marin.execution.lease import Identity; print(json.dumps(Identity.of_this_process().fields()))"
)


def identity_of_a_gone_process() -> dict:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", IDENTITY], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_a_lease_whose_process_on_this_host_is_gone_is_taken_at_once(tmp_path):
    path = str(tmp_path / "step" / ".executor_lease")
    payload = {"owner": "gone", "heartbeat": time.time(), "acquired": 0, **identity_of_a_gone_process()}
    create_if_absent(path, json.dumps(payload).encode())
    claim = try_acquire(path, new_owner_id(), {}, SkewedClock(0))
    assert isinstance(claim, Lease) and claim.took_over


@pytest.mark.parametrize(
    "change", [{"boot": "another-boot"}, {"pid_ns": "pid:[1]"}, {"pid_ns": None}, {"pid_started": None}]
)
def test_a_gone_pid_proves_nothing_unless_boot_namespace_and_start_time_are_ours(tmp_path, change):
    path = str(tmp_path / "step" / ".executor_lease")
    payload = {"owner": "elsewhere", "heartbeat": time.time(), "acquired": 0, **identity_of_a_gone_process(), **change}
    create_if_absent(path, json.dumps(payload).encode())
    assert isinstance(try_acquire(path, new_owner_id(), {}, SkewedClock(0)), LeaseHeld)


def test_a_lease_of_a_live_process_on_this_host_is_not_taken_early(tmp_path):
    path = str(tmp_path / "step" / ".executor_lease")
    mine = {"owner": "alive", "heartbeat": 0, "acquired": 0, **lease_module.Identity.of_this_process().fields()}
    create_if_absent(path, json.dumps(mine).encode())
    assert isinstance(try_acquire(path, new_owner_id(), {}, SkewedClock(0)), LeaseHeld)
