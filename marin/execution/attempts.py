"""Attempt folders: where each attempt of a step writes, and what a new attempt does with earlier ones.

An attempt writes into its own staging folder (`marin.storage.staging`). The executor leaves
`this_output_path()` a marker in the config it hands over, which each attempt binds to its folder
(`bind_output`). A new attempt claims its number by creating its log, then adopts the latest earlier
attempt's files, copied, to resume from them (or starts empty for a rerun with changed code) and
discards the rest; once no earlier folder survives under its own name, nothing its runner still does
can reach the published output. Succeeded steps' attempt folders are removed in the background.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from marin.execution.authoring import resolve_markers
from marin.storage import create_if_absent, list_dir, makedirs
from marin.storage.layout import logs_dir
from marin.storage.staging import adopt, attempts, discard, discard_all, staging_path

logger = logging.getLogger(__name__)


def next_attempt(output_path: str) -> int:
    numbers = [int(n.split(".")[0]) for n in list_dir(logs_dir(output_path)) if n.split(".")[0].isdigit()]
    return max(numbers, default=0) + 1


def bind_output(config: Any, staging: str) -> Any:
    """`config` with its `this_output_path()` markers filled with the attempt's folder `staging`."""
    return resolve_markers(config, None, staging)


def claim_attempt(output_path: str) -> int:
    """The next attempt number, claimed by creating its log file (two runners never share one)."""
    attempt = next_attempt(output_path)
    while create_if_absent(f"{logs_dir(output_path)}/{attempt:03d}.log", b"") is None:
        attempt += 1
    return attempt


@dataclass(frozen=True)
class Attempt:
    """One attempt of a step: its number, its staging folder and its log."""

    output_path: str
    number: int
    staging: str
    log: str
    adopted: str | None
    """The earlier attempt whose files this one resumes from (copied into `staging`), or None."""


def start_attempt(out: str, owner: str, fresh: bool) -> Attempt:
    """Claims the next attempt of `out` and gives it a staging folder (under the step's lease).

    It resumes from a copy of the latest earlier attempt's files, discarding every earlier folder, or
    starts empty when `fresh` (a rerun of a step that succeeded, its code changed). Either way no
    earlier attempt's folder survives under its own name, which is what fences its runner out, and no
    file an earlier runner may still hold open is ever in the new folder.
    """
    number = claim_attempt(out)
    staging = staging_path(out, f"{number:03d}-{owner[:8]}")
    earlier = [a for a in attempts(out) if staging_path(out, a) != staging]
    keep = None if fresh or not earlier else earlier[-1]
    for name in earlier:
        if name != keep:
            discard(staging_path(out, name))
    if keep is not None:
        adopt(staging_path(out, keep), staging)
    makedirs(staging)
    return Attempt(out, number, staging, f"{logs_dir(out)}/{number:03d}.log", keep)


_cleanups: list = []
_cleanups_lock = threading.Lock()
_cleaner = None


def discard_attempts(out: str) -> None:
    """Removes a succeeded step's attempt folders in the background: removing a folder costs a few ms
    locally, which a chain of small steps would otherwise wait for step after step."""
    global _cleaner
    import concurrent.futures

    with _cleanups_lock:
        if _cleaner is None:
            _cleaner = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="marin-cleanup")
        _cleanups.append(_cleaner.submit(_discard_now, out))


def _discard_now(out: str) -> None:
    try:
        discard_all(out)
    except Exception as exc:
        logger.warning("could not remove the attempt folders of %s (harmless): %s", out, exc)


def finish_cleanups() -> None:
    """Waits until the background removal of attempt folders is done (end of a run, end of a Ray task)."""
    import concurrent.futures

    with _cleanups_lock:
        pending = list(_cleanups)
        _cleanups.clear()
    concurrent.futures.wait(pending)
