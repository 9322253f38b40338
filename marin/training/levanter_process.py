"""Making Levanter safe for a process that several steps share, before a train or evaluate step uses it.

The local backend runs steps as threads of one process, and a Ray worker may run one step after another.
Two things Levanter does are process-wide:

- `load_tokenizer` (and its HF checkpoint loaders) swap transformers' `hf_hub_download` for an fsspec one
  for the duration of the call and put the original back after. Two steps doing that at once undo each
  other's swap, and one of them then fails to read a gs:// or s3:// tokenizer ("Can't load tokenizer for
  's3://...'"). And that fsspec download writes each remote file, in place, where the shared Hugging Face
  cache would keep it (`~/.cache/huggingface/hub/models--gs:----bucket--...`), so a step reading the
  file while another step rewrites it gets a truncated JSON ("EOF while parsing a value",
  JSONDecodeError), whether the other step is a thread of this process or another process (Ray
  workers). Here the swap and the download become a critical section for the machine: a re-entrant
  lock for the threads of the process, and, around the outermost call, an exclusive `flock` on a file
  in the temporary folder for the processes.
- tensorstore's kvstore specs, built by jax, must reach marin's S3 and GCS endpoints
  (see marin.training.tensorstore_endpoints).
- Levanter's data loaders prefetch in daemon threads (`BackgroundIterator`, an asyncio loop per loader)
  that are stopped only when the iterator is garbage-collected. One still running when the interpreter
  finalises (the evaluation loader at the end of a training, typically) frees jax arrays there: jaxlib's
  `PyArray_Storage` destructor releases the GIL, and a daemon thread that takes the GIL back during
  finalisation is ended by `pthread_exit`, whose forced unwind through that noexcept destructor calls
  `std::terminate` ("terminate called after throwing an instance of ''", "FATAL: exception not
  rethrown", SIGABRT) after the step has written SUCCESS. Every such iterator is recorded here and
  `stop_background_iterators()` stops and joins them at exit (atexit runs before the interpreter
  finalises, while daemon threads still run; not earlier, since another step of the process may be
  reading through its own loaders). The hook is registered after jax's own exit hook, so it runs first
  (atexit runs last-registered first): the loaders stop before jax clears its backends and shuts
  `jax.distributed` down.
- Levanter's checkpointer commits each checkpoint in a thread of jax's and deletes the time-based
  (temporary) checkpoint a newer one replaces in a daemon thread of its own, and its trainer never waits
  for either. Every checkpointer is recorded here too, and the train step calls
  `wait_for_checkpointers()` when Levanter's loop returns, before it writes `train_info.json`, so that no
  commit is still running (and none of its errors is lost) and no deletion is left half done in a step
  that then ends SUCCESS.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import tempfile
import threading
import weakref

from marin.training.tensorstore_endpoints import use_storage_endpoints

_HF_DOWNLOAD_SWAP = threading.RLock()
_depth = 0
"""How deep the current holder of _HF_DOWNLOAD_SWAP is in nested calls (the machine lock is taken once)."""
_installed = threading.Lock()
_done = False
logger = logging.getLogger(__name__)
_iterators: weakref.WeakSet = weakref.WeakSet()
"""Levanter's live background iterators, whose threads must end before the interpreter finalises."""
_checkpointers: weakref.WeakSet = weakref.WeakSet()
"""Levanter's live checkpointers (each one's deletion thread keeps it alive)."""
STOP_TIMEOUT_S = 30.0
MACHINE_LOCK = os.path.join(tempfile.gettempdir(), f"marin-hf-download-{os.getuid()}.lock")


@contextlib.contextmanager
def _machine_lock():
    import fcntl

    with open(MACHINE_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def prepare_levanter_process() -> None:
    """Idempotent: installs what is described above."""
    global _done
    use_storage_endpoints()
    with _installed:
        if _done:
            return
        from levanter.compat import hf_checkpoints

        original = hf_checkpoints._patch_hf_hub_download

        @contextlib.contextmanager
        def _patch_hf_hub_download(*args, **kwargs):
            global _depth
            with _HF_DOWNLOAD_SWAP:
                outermost = _depth == 0
                _depth += 1
                try:
                    with _machine_lock() if outermost else contextlib.nullcontext():
                        with original(*args, **kwargs) as download:
                            yield download
                finally:
                    _depth -= 1

        hf_checkpoints._patch_hf_hub_download = _patch_hf_hub_download
        from levanter.checkpoint import Checkpointer
        from levanter.utils.background_iterable import BackgroundIterator

        _track_instances(BackgroundIterator, _iterators)
        _track_instances(Checkpointer, _checkpointers)
        atexit.register(stop_background_iterators)
        _done = True


def _track_instances(cls, into) -> None:
    """Adds every instance of `cls` made from now on to the weak set `into`."""
    original_init = cls.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        into.add(self)

    cls.__init__ = __init__


def live_checkpointers() -> set:
    """The Levanter checkpointers alive now (to tell a training's own from those made before it)."""
    return set(_checkpointers)


def wait_for_checkpointers(exclude: set = frozenset()) -> None:
    """Waits for every live Levanter checkpointer not in `exclude`: its commit thread joined (a commit's
    error raised here) and its queue of checkpoints to delete emptied."""
    for checkpointer in list(_checkpointers):
        if checkpointer not in exclude:
            checkpointer.wait_until_finished()


def stop_background_iterators(timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stops every live Levanter background iterator and waits (up to `timeout_s` each) for its thread."""
    for iterator in list(_iterators):
        thread = getattr(iterator, "thread", None)
        iterator.stop(wait=False)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                logger.warning("a Levanter data loader thread did not stop within %.0f s", timeout_s)
