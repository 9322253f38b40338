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

import re
import threading
from collections.abc import Iterable, Sequence
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

TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("a GitHub token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b")),
    ("a GitHub token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}\b")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----")),
)
"""Well-known credential shapes, found wherever they appear."""

URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s\"']*:)(?P<password>[^@/\s\"']+)(?=@)")
"""`scheme://user:PASSWORD@`: the password of a URL's user-info."""

_PLACEHOLDER = re.compile(r"^(?:<[^>]*>|\$\{?\w+\}?|\{\w*\}|\*+|\.\.\.|x+|X+)$")
"""What documentation writes in place of a password (`<password>`, `$PASS`, `***`): not a credential."""

_known: set[str] = set()
_known_lock = threading.Lock()


def _secret_name(flag: str) -> bool:
    name = flag.lstrip("-").lower()
    parts = [p for p in re.split(r"[_\-.]", name) if p]
    return any(p in SECRET_WORDS for p in parts) or "".join(parts[-2:]) in SECRET_WORDS


def _remember(value: str) -> None:
    if len(value) >= 4:
        with _known_lock:
            _known.add(value)


def redact_text(text: str) -> str:
    """`text` with URL passwords, token-shaped strings and every value redacted so far replaced."""
    if not text:
        return text
    with _known_lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, REDACTED)
    text = URL_PASSWORD.sub(lambda m: m["head"] + (m["password"] if _is_placeholder(m["password"]) else REDACTED), text)
    for _, pattern in TOKEN_PATTERNS:
        text = pattern.sub(REDACTED, text)
    return text


def _is_placeholder(value: str) -> bool:
    return value == REDACTED or bool(_PLACEHOLDER.match(value))


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
    argv = [str(a) for a in argv]
    i = 0
    last_flag: str | None = None
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-") and len(arg) > 1 and not _is_number(arg):
            name, eq, value = arg.partition("=")
            last_flag = name
            if _secret_name(name):
                if eq:
                    if value and not _is_placeholder(value):
                        _remember(value)
                        out.append(f"{name}={REDACTED}")
                        notes.append(name)
                    else:
                        out.append(arg)
                    i += 1
                    continue
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                if nxt is not None and not (nxt.startswith("-") and not _is_number(nxt)):
                    out.append(arg)
                    if not _is_placeholder(nxt):
                        _remember(nxt)
                        out.append(REDACTED)
                        notes.append(name)
                    else:
                        out.append(nxt)
                    i += 2
                    last_flag = None
                    continue
                out.append(arg)
                i += 1
                continue
            cleaned, found = _redact_shapes(value if eq else arg)
            out.append(f"{name}={cleaned}" if eq else cleaned)
            notes += [f"{name} ({kind})" for kind in found]
            if not eq:
                i += 1
                continue
            last_flag = None
            i += 1
            continue
        cleaned, found = _redact_shapes(arg)
        out.append(cleaned)
        where = last_flag if last_flag else f"argv[{i}]"
        notes += [f"{where} ({kind})" for kind in found]
        last_flag = None
        i += 1
    return RedactedCommand(out, notes)


def _is_number(arg: str) -> bool:
    try:
        float(arg)
    except ValueError:
        return False
    return True


def _redact_shapes(text: str) -> tuple[str, list[str]]:
    """`text` with URL passwords and token shapes replaced, and what kinds were found."""
    found: list[str] = []

    def url(m: re.Match) -> str:
        if _is_placeholder(m["password"]):
            return m[0]
        _remember(m["password"])
        found.append("URL password")
        return m["head"] + REDACTED

    text = URL_PASSWORD.sub(url, text)
    for kind, pattern in TOKEN_PATTERNS:
        for m in pattern.finditer(text):
            _remember(m[0])
            found.append(kind)
        text = pattern.sub(REDACTED, text)
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


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,\d+)? @@")


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
        hunk = _HUNK.match(raw)
        if hunk:
            line = int(hunk["start"])
            continue
        if raw.startswith("+"):
            findings += [PatchFinding(file, line, kind) for kind in _kinds(raw[1:])]
            line += 1
        elif raw.startswith(" "):
            line += 1
    return findings


def _kinds(text: str) -> Iterable[str]:
    for m in URL_PASSWORD.finditer(text):
        if not _is_placeholder(m["password"]):
            yield "a URL password"
    for kind, pattern in TOKEN_PATTERNS:
        if pattern.search(text):
            yield kind


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
