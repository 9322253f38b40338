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
from typing import Any

from marin.execution.authoring import InputName, VersionedValue
from marin.provenance.redaction import _is_placeholder, _redact_shapes, credential_env_name, credential_name
from marin.provenance.redaction import strip_userinfo as _strip_text
from marin.stepkit.config import OutputName


def credential_fields(config: Any, where: str = "") -> list[str]:
    """`field (why)` for each place of `config` (a dataclass, nested ones, lists and dicts) holding a credential."""
    found: list[str] = []

    def visit(value: Any, path: str, name: str) -> None:
        if isinstance(value, VersionedValue):
            value = value.value
        if isinstance(value, InputName | OutputName) or value is None:
            return
        if isinstance(value, str):
            if value and name and credential_name(name) and not _is_placeholder(value):
                found.append(f"{path} (its name says it is a credential)")
                return
            kinds = [k for k in _redact_shapes(value, remember=False, assignments=False)[1] if k != "URL password"]
            found.extend(f"{path} (it holds {kind})" for kind in dict.fromkeys(kinds))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                visit(getattr(value, f.name), f"{path}.{f.name}" if path else f.name, f.name)
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(item, f"{path}[{key!r}]", "")
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                visit(item, f"{path}[{i}]", "")

    visit(config, where, "")
    return found


def credential_env(resources: Any) -> list[str]:
    """`resources.env['NAME']` for each credential-named variable a step's resources set to a value."""
    env = getattr(resources, "env", None) or {}
    return [
        f"resources.env[{name!r}]"
        for name, value in env.items()
        if value and credential_env_name(name) and not _is_placeholder(value)
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


def checked_scan(step: Any, scan: tuple[dict, list], error: type[Exception] = ValueError) -> tuple[dict, list]:
    """Planning's scan of `step` (versioned values by field path, inputs), refused with `error` (planning's
    PlanError) naming each credential its config or resources hold; URL user-info is removed from the
    versioned values."""
    found = credential_fields(step.config) + credential_env(step.resources)
    if found:
        raise error(
            f"step {step.name!r}: the config would publish a credential: {'; '.join(found)}. A config is stored "
            "in the experiment record and .executor_info; pass the credential through the environment instead "
            "(the step reads os.environ; a Ray cluster's workers get the environment it was started with)"
        )
    versioned, inputs = scan
    return {path: strip_userinfo(v) for path, v in versioned.items()}, inputs
