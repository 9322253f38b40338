"""Names for code: how a record points at a step's function and config type, and how to find them again.

A function in an importable module is named `module:qualname`. A function defined in the experiment
script itself (module `__main__`) is named by the script's path relative to the repository root,
`experiments/tutorial/hello_world.py:generate`, so that `marin rerun` can load the script as a module
and find it. The code fingerprint (sha256 of the function's source and its module's source) is
recorded so that `marin plan` can say when the code behind an existing output has changed.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from typing import Any


@functools.lru_cache(maxsize=1)
def project_root() -> str:
    """The git root above the current directory, or the current directory."""
    path = os.path.abspath(os.getcwd())
    probe = path
    while True:
        if os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return path
        probe = parent


def script_path(module_name: str) -> str | None:
    """The file of `module_name` relative to the project root (absolute when outside it)."""
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    file = os.path.abspath(file)
    root = project_root()
    return os.path.relpath(file, root) if file.startswith(root + os.sep) else file


def reference_of(obj: Any) -> str:
    """`module:qualname`, or `path/to/script.py:qualname` for objects defined in `__main__`."""
    module = getattr(obj, "__module__", None) or "?"
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__
    if module == "__main__":
        path = script_path("__main__")
        if path:
            return f"{path}:{qualname}"
    return f"{module}:{qualname}"


_fingerprints: dict[int, str] = {}


def code_fingerprint(fn: Any) -> str:
    """sha256 of the source of `fn` and of the module that defines it ('' parts when unavailable)."""
    key = id(fn)
    cached = _fingerprints.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    target = inspect.unwrap(fn)
    try:
        digest.update(inspect.getsource(target).encode())
    except (OSError, TypeError):
        digest.update(reference_of(fn).encode())
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    file = getattr(module, "__file__", None)
    if file and os.path.exists(file):
        with open(file, "rb") as f:
            digest.update(f.read())
    _fingerprints[key] = value = digest.hexdigest()
    return value


def resolve_reference(ref: str, root: str | None = None) -> Any:
    """The object a reference names: imports the module, or loads the script file as a module."""
    target, sep, qualname = ref.rpartition(":")
    if not sep or not target or not qualname:
        raise ImportError(f"malformed code reference {ref!r}: expected 'module:qualname' or 'path.py:qualname'")
    if target.endswith(".py"):
        path = target if os.path.isabs(target) else os.path.join(root or project_root(), target)
        if not os.path.exists(path):
            raise ImportError(f"cannot find {ref!r}: script {path} does not exist")
        module = _load_script(path)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise ImportError(f"cannot import module {target!r} for {ref!r}: {exc}") from exc
    obj: Any = module
    for part in qualname.split("."):
        if part == "<locals>" or not hasattr(obj, part):
            raise ImportError(f"cannot find {qualname!r} in {target!r} (for {ref!r})")
        obj = getattr(obj, part)
    return obj


@functools.lru_cache(maxsize=32)
def _load_script(path: str):
    name = "marin_script_" + hashlib.sha256(path.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load script {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
