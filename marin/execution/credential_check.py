"""Keeping credentials out of a step's config, which is published whole: refused at plan time.

A step's config is stored in the experiment record and in the step's `.executor_info`, and its versioned
fields in the version its hash is computed from; all of it is published with the outputs and read back by
`marin rerun`. A credential cannot be replaced there by `<redacted>` without making the record disagree
with the hash and the rerun fail, so planning refuses it, before anything runs or is written: a config field
whose name says it holds a credential (`redaction.credential_name`: `api_key`, `token`, `password`,
`secret`, ...) given a value, a config string shaped like a token (`hf_...`, `AKIA...`, `Bearer ...`), and a
credential-named variable of the step's `resources.env`. The error names the step and the field and says to
pass the credential through the environment.

A URL's user-info is the exception: `http://user:PASS@host/x` is accepted, because the step needs it. The
step gets the config as written, in memory; the record, `.executor_info` and the hash see the URL without
its user-info (`strip_userinfo`), so a rerun from the record reads `http://host/x` and takes its credentials
from the environment (for HTTP, `~/.netrc` or the file `NETRC` names; docs/records.md).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from marin.config.markers import InputName, OutputName, VersionedValue
from marin.config.walk import ConfigScan
from marin.provenance.redaction import credential_env_name, credential_name, is_placeholder, shapes_in
from marin.provenance.redaction import strip_userinfo as _strip_text


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, ...], frozenset[str]]:
    """The field names of a dataclass, and those of them that name a credential."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    return names, frozenset(n for n in names if credential_name(n))


_LEAVES = frozenset({int, float, bool, type(None), InputName, OutputName})
_DATACLASS, _SEQUENCE, _MAPPING, _OTHER = range(4)
_KINDS: dict[type, int] = {}


def _kind(cls: type) -> int:
    found = _KINDS.get(cls)
    if found is None:
        if dataclasses.is_dataclass(cls):
            found = _DATACLASS
        elif issubclass(cls, list | tuple):
            found = _SEQUENCE
        elif issubclass(cls, dict):
            found = _MAPPING
        else:
            found = _OTHER
        found = _KINDS[cls] = found
    return found


def credential_fields(config: Any, where: str = "") -> list[str]:
    """`field (why)` for each place of `config` (a dataclass, nested ones, lists and dicts) holding a credential.
    Planning calls this for every step, so leaves are handled in their container's loop, not by a call each."""
    found: list[str] = []

    def text(value: str, name: Any, named: bool, where: str) -> None:
        if named and not is_placeholder(value):
            found.append(f"{_path(where, name)} (its name says it is a credential)")
        else:
            kinds = _shape_kinds(value)
            if kinds:
                found.extend(f"{_path(where, name)} (it holds {kind})" for kind in kinds)

    def visit(value: Any, where: str) -> None:
        k = _kind(type(value))
        if k == _DATACLASS:
            names, secrets = _fields(type(value))
            items = ((name, getattr(value, name)) for name in names)
        elif k == _SEQUENCE:
            items, secrets = enumerate(value), ()
        elif k == _MAPPING:
            items, secrets = value.items(), ()
        else:
            return
        for name, item in items:
            cls = type(item)
            if cls is VersionedValue:
                item = item.value
                cls = type(item)
            if cls in _LEAVES:
                continue
            key = name if k == _DATACLASS else [name]
            if cls is str or isinstance(item, str):
                if item:
                    text(item, key, name in secrets, where)
            else:
                visit(item, _path(where, key))

    value = config.value if type(config) is VersionedValue else config
    if isinstance(value, str):
        if value:
            text(value, "", False, where)
    elif type(value) not in _LEAVES:
        visit(value, where)
    return found


def _path(where: str, name: Any) -> str:
    if isinstance(name, list):
        return f"{where}[{name[0]!r}]"
    return f"{where}.{name}" if where and name else where or name


@functools.lru_cache(maxsize=1 << 16)
def _shape_kinds(text: str) -> tuple[str, ...]:
    """The token shapes in a config string (remembered: configs repeat their strings from step to step)."""
    return tuple(k for k in dict.fromkeys(shapes_in(text)) if k != "URL password")


def credential_env(resources: Any) -> list[str]:
    """`resources.env['NAME']` for each credential-named variable a step's resources set to a value."""
    env = getattr(resources, "env", None) or {}
    return [
        f"resources.env[{name!r}]"
        for name, value in env.items()
        if value and credential_env_name(name) and not is_placeholder(value)
    ]


def strip_userinfo(value: Any) -> Any:
    """A canonical value (str, list, dict) with the user-info of every URL in its strings removed."""
    if isinstance(value, str):
        return _strip_text(value)
    if isinstance(value, list):
        return [strip_userinfo(v) for v in value]
    if isinstance(value, dict):
        return {k: strip_userinfo(v) for k, v in value.items()}
    return value


def checked_scan(step: Any, found: ConfigScan, error: type[Exception] = ValueError) -> ConfigScan:
    """Planning's scan of `step` (`marin.config.walk.scan`), refused with `error` (planning's PlanError) naming
    each credential its config or resources hold; URL user-info is removed from its versioned values."""
    problems = credential_fields(step.config) + credential_env(step.resources)
    if problems:
        raise error(
            f"step {step.name!r}: the config would publish a credential: {'; '.join(problems)}. A config is stored "
            "in the experiment record and .executor_info; pass the credential through the environment instead "
            "(the step reads os.environ; a Ray cluster's workers get the environment it was started with)"
        )
    versioned = found.versioned
    for path, value in versioned.items():
        if type(value) is not str or "@" in value:
            versioned[path] = strip_userinfo(value)
    return found
