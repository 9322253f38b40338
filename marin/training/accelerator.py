"""Refusing to train on the CPU when the step asked for an accelerator.

jax falls back to the CPU without an error when its CUDA or TPU build is missing, or when no device is
visible to the process: a step that asked Ray for a GPU would then train for hours on the host's cores.
So the train step checks, before reading any data, that jax's backend is the accelerator the step's
`ResourceConfig` asks for (`gpu > 0`: a GPU; `tpu`: a TPU), or any accelerator when the config sets
`require_accelerator`; otherwise it fails naming what was asked, what jax sees, and the command that
installs the missing build (`uv sync --frozen --extra gpu` or `--extra tpu`, the lock's pinned jax).
"""

from __future__ import annotations

INSTALL = {
    "gpu": "uv sync --frozen --extra gpu  (jax[cuda12], pinned in uv.lock)",
    "tpu": "uv sync --frozen --extra tpu  (jax[tpu], pinned in uv.lock)",
}


def required_accelerator(resources: dict | None, require_any: bool) -> str | None:
    """'tpu' or 'gpu' when the step's resources ask for one, 'any' for `require_accelerator`, else None."""
    resources = resources or {}
    if resources.get("tpu"):
        return "tpu"
    if resources.get("gpu"):
        return "gpu"
    return "any" if require_any else None


def check_accelerator(step: str, resources: dict | None, require_any: bool = False) -> str | None:
    """Raises RuntimeError when jax's backend is not the accelerator the step needs; returns what it needed."""
    needed = required_accelerator(resources, require_any)
    if needed is None:
        return None
    import jax

    backend = jax.default_backend()
    if backend == needed or (needed == "any" and backend != "cpu"):
        return needed
    asked = (
        f"its ResourceConfig asks for {needed}={(resources or {}).get(needed)}"
        if needed != "any"
        else "its config sets require_accelerator=True"
    )
    fixes = [INSTALL[needed]] if needed in INSTALL else list(INSTALL.values())
    raise RuntimeError(
        f"{step} needs a {needed.upper() if needed != 'any' else 'GPU or TPU'} ({asked}), but jax "
        f"{jax.__version__} sees only {backend} devices ({', '.join(sorted({d.device_kind for d in jax.devices()}))}): "
        f"refusing to train on the {backend}. Install jax's accelerator build with `{' or '.join(fixes)}`, "
        "and check that the device is visible to this process (nvidia-smi, CUDA_VISIBLE_DEVICES, TPU_VISIBLE_CHIPS)."
    )
