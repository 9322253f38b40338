"""Making Levanter safe for a process that several steps share, before a train or evaluate step uses it.

The local backend runs steps as threads of one process, and a Ray worker may run one step after another.
Two things Levanter does are process-wide:

- `load_tokenizer` (and its HF checkpoint loaders) swap transformers' `hf_hub_download` for an fsspec one
  for the duration of the call and put the original back after. Two steps doing that at once undo each
  other's swap, and one of them then fails to read a gs:// or s3:// tokenizer ("Can't load tokenizer for
  's3://...'", or a JSONDecodeError on a file another thread's temporary folder lost). Here the swap
  becomes a critical section (a re-entrant lock around Levanter's `_patch_hf_hub_download`).
- tensorstore's kvstore specs, built by jax, must reach marin's S3 and GCS endpoints
  (see marin.training.tensorstore_endpoints).
"""

from __future__ import annotations

import contextlib
import threading

from marin.training.tensorstore_endpoints import use_storage_endpoints

_HF_DOWNLOAD_SWAP = threading.RLock()
_installed = threading.Lock()
_done = False


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
            with _HF_DOWNLOAD_SWAP, original(*args, **kwargs) as download:
                yield download

        hf_checkpoints._patch_hf_hub_download = _patch_hf_hub_download
        _done = True
