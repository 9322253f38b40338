"""Names for code: how a record points at a step's function and config type, and how to find them again.

A function in an importable module is named `module:qualname`. A function defined in the experiment
script itself (module `__main__`) is named by the script's path relative to the repository root,
`experiments/tutorial/hello_world.py:generate`, so that `marin rerun` can load the script as a module
and find it. A script loaded that way keeps its name: `reference_of` maps the module the loader made up
back to the script's path, so the rerun's own record names the same `path.py:qualname` and can be rerun
in turn, any number of times. Ray workers cannot import a made-up module, so a rerun on Ray ships the
loaded scripts to its workers by value (`ship_scripts_by_value`), as cloudpickle already ships `__main__`.

The code fingerprint is sha256 over the function's source, its module's source and the source of every
project module that module imports, transitively (project files only: under the project root and
outside virtual environments; not the executor's own plumbing, see NOT_STEP_CODE). It is recorded in
`.executor_info` so that a run and `marin plan` can say when the code behind an existing output has
changed, even when the change is in a helper module.
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

from marin.provenance.probe import project_root


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
    """`module:qualname`, or `path/to/script.py:qualname` for objects defined in `__main__` or in a script
    loaded by `resolve_reference`."""
    module = getattr(obj, "__module__", None) or "?"
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__
    if module in _SCRIPT_TARGETS:
        return f"{_SCRIPT_TARGETS[module]}:{qualname}"
    if module == "__main__":
        path = script_path("__main__")
        if path:
            return f"{path}:{qualname}"
    return f"{module}:{qualname}"


_fingerprints: dict[int, tuple[Any, str]] = {}
"""id(fn) -> (fn, fingerprint): the function is kept so that its id cannot be reused by another one."""


def code_fingerprint(fn: Any) -> str:
    """sha256 of the source of `fn`, of its module, and of the project modules that module imports.

    Remembered per function object (the code a process runs is what it imported); module files are read
    again when their size or modification time changed, so a module imported anew after an edit (a new
    function object) gets the new code's fingerprint."""
    key = id(fn)
    cached = _fingerprints.get(key)
    if cached is not None and cached[0] is fn:
        return cached[1]
    digest = hashlib.sha256()
    target = inspect.unwrap(fn)
    try:
        digest.update(inspect.getsource(target).encode())
    except (OSError, TypeError):
        digest.update(reference_of(fn).encode())
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    file = getattr(module, "__file__", None)
    if file and os.path.exists(file):
        digest.update(_module_digest(os.path.abspath(file), getattr(module, "__package__", None) or ""))
    value = digest.hexdigest()
    _fingerprints[key] = (fn, value)
    return value


def _stamp(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4096)
def _file_bytes(path: str, stamp: tuple[int, int]) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _module_digest(file: str, package: str) -> bytes:
    """sha256 of a module's source and of the project files it imports, each named relative to the project
    root (the same code in two checkouts, or in a rerun's temporary copy, has the same digest)."""
    digest = hashlib.sha256()
    digest.update(_file_bytes(file, _stamp(file)))
    root = project_root()
    for path in project_imports(file, package):
        digest.update(b"\0" + os.path.relpath(path, root).encode() + b"\0" + _file_bytes(path, _stamp(path)))
    return digest.digest()


def project_imports(file: str, package: str = "") -> list[str]:
    """The project files `file` imports, directly or through other project files (sorted, without `file`).

    Read from the import statements (also those inside functions), not from what has been imported so
    far, and located on disk under the project root without importing anything."""
    seen: set[str] = set()
    stack = [(file, package)]
    while stack:
        current, pkg = stack.pop()
        for path, sub_pkg in _direct_imports(current, pkg, _stamp(current)):
            if path not in seen and path != file:
                seen.add(path)
                stack.append((path, sub_pkg))
    return sorted(seen)


@functools.lru_cache(maxsize=4096)
def _direct_imports(file: str, package: str, stamp: tuple[int, int]) -> tuple[tuple[str, str], ...]:
    import ast

    try:
        with open(file, "rb") as f:
            tree = ast.parse(f.read(), filename=file)
    except (OSError, SyntaxError, ValueError):
        return ()
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - node.level + 1] if node.level > 1 else parts
                base = ".".join([*parts, base] if base else parts)
            if base:
                names.append(base)
            names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names if alias.name != "*"]
    found: dict[str, str] = {}
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            located = _locate(".".join(parts[:i]))
            if located:
                found[located[0]] = located[1]
    return tuple(sorted(found.items()))


NOT_STEP_CODE = ("marin.execution", "marin.config", "marin.provenance", "marin.storage")
"""Packages whose changes are not a step's code change: the executor (hashing, scheduling, records), the
config semantics it hashes and records with (marin.config), and the storage and provenance layers under it are imported by every experiment, and following them would flag every output as
made by other code after any edit to the plumbing. The step library (marin.processing, marin.training,
marin.stepkit.sharding, ...) is followed."""


def _locate(module: str) -> tuple[str, str] | None:
    """The project file of `module` and the package its relative imports resolve against, or None."""
    if any(module == name or module.startswith(name + ".") for name in NOT_STEP_CODE):
        return None
    base = os.path.join(project_root(), *module.split("."))
    for path, package in ((os.path.join(base, "__init__.py"), module), (base + ".py", module.rpartition(".")[0])):
        if os.path.isfile(path):
            return path, package
    return None


def resolve_reference(ref: str, root: str | None = None) -> Any:
    """The object a reference names: imports the module, or loads the script file as a module."""
    target, sep, qualname = ref.rpartition(":")
    if not sep or not target or not qualname:
        raise ImportError(f"malformed code reference {ref!r}: expected 'module:qualname' or 'path.py:qualname'")
    if target.endswith(".py"):
        path = _SCRIPT_OVERRIDES.get(target) or (
            target if os.path.isabs(target) else os.path.join(root or project_root(), target)
        )
        if not os.path.exists(path):
            raise ImportError(f"cannot find {ref!r}: script {path} does not exist")
        module = _load_script(os.path.abspath(path), target)
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


_SCRIPT_OVERRIDES: dict[str, str] = {}
"""A script's path as references spell it -> the file to load it from instead (a rerun's stored source)."""


def use_script_source(target: str, local_file: str) -> None:
    """Load references to the script `target` from `local_file`; they keep naming `target`."""
    _SCRIPT_OVERRIDES[target] = local_file


def script_override(target: str) -> str | None:
    return _SCRIPT_OVERRIDES.get(target)


_SCRIPT_TARGETS: dict[str, str] = {}
"""Module name made up for a loaded script -> the script's path as the reference spelled it."""


@functools.lru_cache(maxsize=32)
def _load_script(path: str, target: str):
    """The script at `path` as a module (its `if __name__ == "__main__":` block does not run)."""
    name = "marin_script_" + hashlib.sha256(path.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load script {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    _SCRIPT_TARGETS[name] = target
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name], _SCRIPT_TARGETS[name]
        raise
    return module


def ship_scripts_by_value() -> None:
    """Makes Ray pickle the loaded scripts' functions and classes by value, so that workers (on any node)
    run them without importing the made-up module or having the script file."""
    import ray.cloudpickle

    for name in _SCRIPT_TARGETS:
        ray.cloudpickle.register_pickle_by_value(sys.modules[name])
