"""Leases: at most one runner works on a step at a time, on any storage (docs/executor.md, "Leases").

A runner claims a step by creating `.executor_lease` only if it is absent, and holds it for one `with`
block: entering starts the heartbeats, leaving (however) releases it. While held, one keeper thread
per process refreshes every lease the process holds each `MARIN_LEASE_HEARTBEAT_S` seconds, each
refresh conditional on the version it last wrote. If a refresh finds another version, someone took the
lease over: the lease is *lost*, the holder's thread is interrupted, and nothing more is written for
it (fencing; marin.storage.staging makes that hold for whatever the step itself still writes).

Staleness never compares two hosts' clocks. A waiting runner judges a lease stale when it has seen the
same lease version, unchanged, for `MARIN_LEASE_TIMEOUT_S` by its *own* monotonic clock: a holder
whose wall clock runs minutes ahead or behind is neither robbed while it heartbeats nor waited on
forever once it stops. The heartbeat time in the file is for people (the browser), not the protocol.

One shortcut: a holder that provably was a process of this runner's own boot and PID namespace, and is
gone, is stale at once. The lease records who holds it (`Identity`: host, boot id, PID namespace, pid
and the process's start time); anything that cannot be compared (another boot or namespace, a /proc
that is not ours, a field missing) proves nothing, and the taker waits for staleness. Every time read
here comes from an injectable `Clock`, so tests skew it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from marin.storage import (
    create_if_absent,
    current_version,
    delete_if_unchanged,
    read_with_version,
    replace_if_unchanged,
)
from marin.storage.layout import lease_heartbeat_s, lease_timeout_s

logger = logging.getLogger(__name__)


class Clock:
    """Where leases read the time: `monotonic()` judges staleness, `time()` only labels heartbeats."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


SYSTEM_CLOCK = Clock()


class LeaseLost(BaseException):
    """Raised in a step's thread when its lease was taken over; BaseException so steps don't swallow it."""


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def process_start_time(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (Linux), or None when unknown or gone."""
    stat = _read(f"/proc/{pid}/stat")
    try:
        return int(stat.rsplit(")", 1)[1].split()[19]) if stat else None
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class Identity:
    """Who holds a lease, in the terms that can prove on this host that the holder is gone."""

    host: str
    """The holder's host name (for people; host names are not unique)."""
    boot: str | None
    """`/proc/sys/kernel/random/boot_id`: differs between machines and between boots of one."""
    pid_ns: str | None
    """The holder's PID namespace (`/proc/self/ns/pid`, e.g. `pid:[4026531836]`)."""
    pid: int
    """The holder's pid, as its own namespace numbers it."""
    pid_started: int | None
    """The holder's start time in ticks since boot, so a pid reused by another process is told apart."""

    @classmethod
    def of_this_process(cls) -> Identity:
        try:
            pid_ns = os.readlink("/proc/self/ns/pid")
            ours = os.readlink("/proc/self") == str(os.getpid())  # a /proc of another namespace proves nothing
        except OSError:
            pid_ns, ours = None, False
        return cls(
            socket.gethostname(),
            _read("/proc/sys/kernel/random/boot_id") if ours else None,
            pid_ns if ours else None,
            os.getpid(),
            process_start_time(os.getpid()) if ours else None,
        )

    def fields(self) -> dict:
        return dataclasses.asdict(self)


_me: Identity | None = None


def _this_process() -> Identity:
    global _me
    if _me is None or _me.pid != os.getpid():
        _me = Identity.of_this_process()
    return _me


def same_holder(info: dict, identity: dict) -> bool:
    """Whether the lease `info` was written by the process `identity` names (host, boot, namespace, pid, start
    time all known and equal): a step lease of a run whose own run marker went stale or whose process is gone."""
    keys = ("host", "boot", "pid_ns", "pid", "pid_started")
    return all(identity.get(k) is not None and info.get(k) == identity.get(k) for k in keys)


def holder_is_gone(info: dict) -> bool:
    """True only when the holder provably was a process of this boot and PID namespace that no longer runs."""
    me = _this_process()
    pid, started = info.get("pid"), info.get("pid_started")
    if None in (me.boot, me.pid_ns) or not isinstance(pid, int) or not isinstance(started, int):
        return False
    if info.get("host") != me.host or info.get("boot") != me.boot or info.get("pid_ns") != me.pid_ns:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    current = process_start_time(pid)
    return current is not None and current != started


def _payload(owner: str, acquired: float, clock: Clock) -> bytes:
    body = {"owner": owner, "heartbeat": clock.time(), "acquired": acquired, **_this_process().fields()}
    return json.dumps(body, sort_keys=True).encode()


@dataclass
class LeaseHeld:
    """Someone else holds the lease."""

    owner: str
    host: str | None
    age_s: float
    """Seconds since its last heartbeat by the holder's wall clock (for messages: staleness never reads it)."""
    version: str


@dataclass(eq=False)
class Lease:
    """A lease this process holds: `with lease:` heartbeats it (interrupting this thread if it is lost)
    and releases it on the way out."""

    path: str
    owner: str
    acquired: float
    version: str
    took_over: bool = False
    clock: Clock = SYSTEM_CLOCK
    lost: threading.Event = field(default_factory=threading.Event)
    thread_id: int | None = None
    """The thread a lost lease interrupts (the one that entered the `with`); None: no interrupt."""
    last_refresh: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: bool = False
    deferred: bool = False
    """Set by `defer_release`: leaving the `with` normally keeps the lease; whoever deferred releases it."""

    def __post_init__(self):
        if self.last_refresh is None:
            self.last_refresh = self.clock.monotonic()

    def __enter__(self) -> Lease:
        self.thread_id = threading.get_ident()
        _keeper.add(self)
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None and self.deferred:
            return
        self.release()

    def defer_release(self) -> None:
        """Keeps the lease (and its heartbeats) past the `with`, for work that must end before it is
        released (removing a step's attempt folders in the background); no thread is interrupted any more
        if it is lost. The caller must `release()` it."""
        with self.lock:
            self.thread_id = None
        self.deferred = True

    def refresh(self) -> bool:
        """Writes a new heartbeat if the lease is still ours; False (and marks it lost) otherwise."""
        with self.lock:
            return self._refresh_locked()

    def _refresh_locked(self) -> bool:
        if self.released:
            return True
        if self.lost.is_set():
            return False
        try:
            new = replace_if_unchanged(self.path, _payload(self.owner, self.acquired, self.clock), self.version)
        except Exception as exc:
            if self.clock.monotonic() - self.last_refresh > lease_timeout_s():
                logger.warning("lease %s: cannot refresh for longer than the timeout (%s)", self.path, exc)
                self.lost.set()
                return False
            logger.warning("lease %s: heartbeat failed, will retry: %s", self.path, exc)
            return True
        if new is None:
            self.lost.set()
            return False
        self.version = new
        self.last_refresh = self.clock.monotonic()
        return True

    def still_held(self) -> bool:
        """A read-only fence check: the lease file still has the version this runner last wrote."""
        with self.lock:
            if self.lost.is_set():
                return False
            try:
                if current_version(self.path) == self.version:
                    return True
            except Exception as exc:
                logger.warning("lease %s: fence check failed (%s); refreshing instead", self.path, exc)
                return self._refresh_locked()
            self.lost.set()
            return False

    def check(self) -> None:
        """Raises LeaseLost unless `still_held()`."""
        if not self.still_held():
            raise LeaseLost()

    def heartbeat_or_interrupt(self) -> None:
        """The keeper's tick: refresh, and interrupt the holder's thread if the lease was lost."""
        with self.lock:
            if self._refresh_locked() or self.released:
                return
            logger.error("lost the lease %s: another runner took the step over; cancelling", self.path)
            if self.thread_id is not None:
                interrupt_thread(self.thread_id)

    def release(self) -> None:
        """Stops the heartbeats and deletes the lease if it is still ours (idempotent)."""
        _keeper.remove(self)
        with self.lock:
            if self.released:
                return
            self.released = True
            if self.lost.is_set():
                return
            try:
                delete_if_unchanged(self.path, self.version)
            except Exception as exc:
                logger.warning("could not release lease %s (it will go stale): %s", self.path, exc)


def new_owner_id() -> str:
    return uuid.uuid4().hex


ACQUIRE_ATTEMPTS = 20
"""How often `try_acquire` retries when the lease changes between its create, read and takeover."""


class LeaseContention(RuntimeError):
    """The lease changed under every one of `ACQUIRE_ATTEMPTS` tries to claim or read it."""


def try_acquire(
    path: str,
    owner: str,
    seen: dict[str, float] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    gone: Callable[[dict], bool] = holder_is_gone,
    log_takeover: bool = True,
) -> Lease | LeaseHeld:
    """Claims the lease at `path`, taking over a stale one; `seen` tracks versions across calls.

    `seen` maps each lease version this runner met to when it first met it (`clock.monotonic()`); a
    version met more than `MARIN_LEASE_TIMEOUT_S` ago and still there is stale. Without `seen`, only a
    lease whose holder is provably gone (`gone`, by default `holder_is_gone`) is ever stale.

    A try loses a race when the lease vanishes between the failed create and the read (its holder
    released it), or when another runner takes a stale lease over first; each lost race means someone
    else made progress, so a few tries settle it and a bound turns a pathological loop into an error.
    """
    seen = {} if seen is None else seen
    for _ in range(ACQUIRE_ATTEMPTS):
        now = clock.time()
        version = create_if_absent(path, _payload(owner, now, clock))
        if version is not None:
            return Lease(path, owner, now, version, clock=clock)
        current = read_with_version(path)
        if current is None:
            continue
        try:
            info = json.loads(current.data)
            heartbeat, holder, host = float(info["heartbeat"]), str(info["owner"]), info.get("host")
        except (ValueError, KeyError, TypeError):
            info, heartbeat, holder, host = {}, now, "<unreadable lease>", None
        unchanged_s = clock.monotonic() - seen.setdefault(current.version, clock.monotonic())
        holder_gone = gone(info)
        if not holder_gone and unchanged_s <= lease_timeout_s():
            return LeaseHeld(holder, host, now - heartbeat, current.version)
        version = replace_if_unchanged(path, _payload(owner, now, clock), current.version)
        if version is None:
            continue
        why = "its process on this host is gone" if holder_gone else f"unchanged for {unchanged_s:.0f} s"
        if log_takeover:
            logger.warning("took over the stale lease %s from %s (%s)", path, holder, why)
        return Lease(path, owner, now, version, took_over=True, clock=clock)
    raise LeaseContention(
        f"lease {path}: changed under each of {ACQUIRE_ATTEMPTS} tries to claim it "
        "(created, released or taken over by other runners every time)"
    )


def interrupt_thread(thread_id: int, exc: type[BaseException] = LeaseLost) -> None:
    """Raises `exc` (LeaseLost) in another thread at its next Python instruction."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


class _Keeper:
    """One thread per process that heartbeats every lease the process holds."""

    def __init__(self):
        self._leases: set[Lease] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases.add(lease)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="marin-lease-keeper", daemon=True)
                self._thread.start()

    def remove(self, lease: Lease) -> None:
        with self._lock:
            self._leases.discard(lease)

    def _loop(self) -> None:
        while True:
            try:
                interval = lease_heartbeat_s()
            except ValueError as exc:  # checked before the run; if it changed since, keep beating
                logger.error("%s; heartbeating every second", exc)
                interval = 1.0
            time.sleep(interval)
            with self._lock:
                leases = list(self._leases)
            for lease in leases:
                if not lease.lost.is_set():
                    lease.heartbeat_or_interrupt()


_keeper = _Keeper()
