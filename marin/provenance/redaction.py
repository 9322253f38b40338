"""Keeping credentials out of what a run writes: its command line, its logs, its records.

A prefix is meant to be shared (a lab's bucket is readable by the whole lab, often public), and a run
writes its command line into the experiment record, every `.runs.jsonl` line and every step's
`.executor_info`. A wrapper script's own `--password X`, a `--ray_address ray://admin:PASS@host` or a
token pasted as an argument would land there verbatim. So the command is redacted before anything is
written, by three rules:

- the value of a flag whose name has a part like password, secret, token, key, credential or auth
  (`--hf_token X`, `--api-key=X`, `--config.aws_secret_access_key X`);
- the password of a URL's user-info (`scheme://user:PASS@host`), wherever it appears;
- strings shaped like well-known tokens (AWS access key ids, Hugging Face, GitHub and Google API
  tokens), wherever they appear.

The redacted values are remembered for the life of the process, so that the step logs captured in this
process (`capture.py`) replace them too. The record names the flags it redacted (`redacted`).

The working-tree patch a run stores (for `marin rerun`) cannot be edited without breaking reruns, so it is
scanned instead: a credential-shaped line in it refuses the run, naming file and line
(`find_in_patch`); `--allow_credentials_in_patch` accepts it.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass

REDACTED = "<redacted>"

SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "pass",
        "passphrase",
        "secret",
        "secrets",
        "token",
        "key",
        "apikey",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "authtoken",
        "accesstoken",
        "privatekey",
        "cookie",
    }
)
"""A flag whose name has one of these as a part (split at `_`, `-` and `.`) has a secret value."""

TOKEN_PATTERNS: tuple[tuple[str, str], ...] = (
    ("an AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("a Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}\b"),
    ("a GitHub token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b"),
    ("a GitHub token", r"\bgithub_pat_[A-Za-z0-9_]{22,}\b"),
    ("a Google API key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    ("a private key", r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"),
)
"""Well-known credential shapes, found wherever they appear (compiled on first use, by `re`'s cache: a
process that never writes a record or a log does not pay for them)."""

URL_PASSWORD = r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s\"']*:)(?P<password>[^@/\s\"']+)(?=@)"
"""`scheme://user:PASSWORD@`: the password of a URL's user-info."""

_PLACEHOLDER = r"^(?:<[^>]*>|\$\{?\w+\}?|\{\w*\}|\*+|\.\.\.|x+|X+)$"
"""What documentation writes in place of a password (`<password>`, `$PASS`, `***`): not a credential."""

_known: set[str] = set()
_known_lock = threading.Lock()
_known_longest_first: tuple[str, ...] = ()
"""`_known`, longest first (rebuilt when a value is remembered, not per line)."""


@functools.cache
def _any_shape() -> re.Pattern:
    """Every shape in one pattern: a line it finds nothing in (almost every log line) skips the passes."""
    return re.compile("|".join(f"(?:{p})" for p in (URL_PASSWORD, *(p for _, p in TOKEN_PATTERNS))))


def _secret_name(flag: str) -> bool:
    name = flag.lstrip("-").lower()
    parts = [p for p in re.split(r"[_\-.]", name) if p]
    return any(p in SECRET_WORDS for p in parts) or "".join(parts[-2:]) in SECRET_WORDS


def _remember(value: str) -> None:
    global _known_longest_first
    if len(value) >= 4:
        with _known_lock:
            if value not in _known:
                _known.add(value)
                _known_longest_first = tuple(sorted(_known, key=len, reverse=True))


def redact_text(text: str) -> str:
    """`text` with URL passwords, token-shaped strings and every value redacted so far replaced."""
    if not text:
        return text
    for value in _known_longest_first:
        if value in text:
            text = text.replace(value, REDACTED)
    if not _any_shape().search(text):
        return text
    return _redact_shapes(text, remember=False)[0]


def _is_placeholder(value: str) -> bool:
    return value == REDACTED or bool(re.match(_PLACEHOLDER, value))


@dataclass(frozen=True)
class RedactedCommand:
    """A command line with its credentials replaced by `REDACTED`."""

    argv: list[str]
    """The command line as records hold it."""
    redacted: list[str]
    """What was replaced, one entry per place: a flag's name (`--password`), `--flag (URL password)`,
    `--flag (an AWS access key id)`, or `argv[3] (...)` for a positional argument."""


def redact_argv(argv: Sequence[str]) -> RedactedCommand:
    """Redacts the values of secret-named flags (`--flag value` and `--flag=value`), URL passwords and
    token-shaped strings; the values found are remembered, so `redact_text` replaces them in logs too."""
    out: list[str] = []
    notes: list[str] = []
    flag: str | None = None  # the bare flag whose value the next positional argument is
    for i, arg in enumerate(str(a) for a in argv):
        if arg.startswith("-") and len(arg) > 1 and not _is_number(arg):
            name, eq, value = arg.partition("=")
            flag = None if eq else name
            if _secret_name(name):
                secret = eq and value and not _is_placeholder(value)
                out.append(f"{name}={REDACTED}" if secret else arg)
                if secret:
                    _remember(value)
                    notes.append(name)
                continue
            where, arg = name, value if eq else arg
        elif flag is not None and _secret_name(flag):
            out.append(arg if _is_placeholder(arg) else REDACTED)
            if not _is_placeholder(arg):
                _remember(arg)
                notes.append(flag)
            flag = None
            continue
        else:
            where, flag, eq = flag or f"argv[{i}]", None, ""
        cleaned, found = _redact_shapes(arg)
        out.append(f"{where}={cleaned}" if eq else cleaned)
        notes += [f"{where} ({kind})" for kind in found]
    return RedactedCommand(out, notes)


def _is_number(arg: str) -> bool:
    try:
        float(arg)
    except ValueError:
        return False
    return True


def _redact_shapes(text: str, remember: bool = True) -> tuple[str, list[str]]:
    """`text` with URL passwords and token shapes replaced, and what kinds were found (one per place); with
    `remember`, the values found are redacted from every later `redact_text` too."""
    found: list[str] = []

    def url(m: re.Match) -> str:
        if _is_placeholder(m["password"]):
            return m[0]
        if remember:
            _remember(m["password"])
        found.append("URL password")
        return m["head"] + REDACTED

    text = re.sub(URL_PASSWORD, url, text)
    for kind, pattern in TOKEN_PATTERNS:
        for m in re.finditer(pattern, text):
            if remember:
                _remember(m[0])
            found.append(kind)
        text = re.sub(pattern, REDACTED, text)
    return text, found


@dataclass(frozen=True)
class PatchFinding:
    """A credential-shaped string on a line that the working-tree patch adds."""

    file: str
    """The file's path in the checkout, as the patch names it."""
    line: int
    """Its line number in the new version of the file."""
    kind: str
    """What it looks like: 'a Hugging Face token', 'a URL password', ..."""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.kind}"


_HUNK = r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,\d+)? @@"


def find_in_patch(patch: bytes) -> list[PatchFinding]:
    """The credential-shaped strings on the lines a `git diff` patch adds (token shapes and URL passwords;
    not secret-named words, which code and docs name all the time)."""
    findings: list[PatchFinding] = []
    file = "?"
    line = 0
    for raw in patch.decode("utf-8", "replace").splitlines():
        if raw.startswith("+++ "):
            target = raw[4:].strip()
            file = target[2:] if target.startswith("b/") else target
            continue
        if raw.startswith("diff --git ") or raw.startswith("--- "):
            continue
        hunk = re.match(_HUNK, raw)
        if hunk:
            line = int(hunk["start"])
            continue
        if raw.startswith("+"):
            kinds = dict.fromkeys(_redact_shapes(raw[1:], remember=False)[1])
            findings += [PatchFinding(file, line, "a " + k if k == "URL password" else k) for k in kinds]
            line += 1
        elif raw.startswith(" "):
            line += 1
    return findings


class CredentialInPatchError(ValueError):
    """The working-tree patch a run would store holds something credential-shaped."""

    def __init__(self, findings: Sequence[PatchFinding]):
        shown = "; ".join(str(f) for f in findings[:5]) + (
            f" and {len(findings) - 5} more" if len(findings) > 5 else ""
        )
        super().__init__(
            f"the uncommitted changes this run would store under the prefix hold something credential-shaped: "
            f"{shown}. Remove it (the patch is stored verbatim, for reruns), or pass --allow_credentials_in_patch "
            "if it is not a credential"
        )
        self.findings = list(findings)
