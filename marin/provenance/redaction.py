"""Keeping credentials out of everything a run writes: its command line, its logs, its records.

A prefix is meant to be shared (a lab's bucket is readable by the whole lab, often public), and a run
writes text into it from many places: its command line into the experiment record, every `.runs.jsonl`
line and every step's `.executor_info`; a failed step's exception into its run line; whatever a step
prints into its log; counts into `stats.json`. Every such text passes this one module before it is
written, under one rule (docs/records.md, "Redaction"):

- by name: the value of a flag, an assignment (`password=X`, `"api_key": "X"`) or an environment variable
  whose name says it is a credential (`credential_name`: password, secret, token, api key, creds, auth,
  cookie, ...; a flag also when a part of its name is `key`, and `-p`);
- by shape, wherever it appears: the password of a URL's user-info (`scheme://user:PASS@host`), the
  value of an `Authorization:` header or after `Bearer`, and well-known token shapes (AWS access key ids,
  Hugging Face, GitHub, GitLab, Slack, OpenAI-style `sk-` keys, Google API keys, JSON web tokens,
  private-key headers);
- by value: every value found by name or shape in this process's command line, and the value of every
  credential-named environment variable (`remember_environment`, as CI systems mask their secrets), is
  replaced wherever it appears later.

Structured values that a rerun must read back (a step's config, its version) keep no URL user-info at
all (`strip_userinfo`): `http://user:PASS@host/x` is stored as `http://host/x`, a valid URL whose
credentials come from the environment when it is used again.

Code a run stores for reruns (the working-tree patch, scripts outside the checkout) cannot be edited
without breaking reruns, so it is scanned instead: a credential-shaped line refuses the run, naming file
and line (`find_in_patch`, `find_in_source`); `--allow_credentials_in_patch` accepts it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

REDACTED = "<redacted>"

CREDENTIAL_STEMS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "credential",
    "apikey",
    "accesskey",
    "privatekey",
    "authtoken",
    "accesstoken",
    "apitoken",
    "sessiontoken",
    "refreshtoken",
    "bearer",
)
"""A name holding one of these (lowercased, separators removed: `dbPassword`, `x-api-key`,
`aws_secret_access_key`) names a credential."""

CREDENTIAL_PARTS = frozenset({"pwd", "pass", "creds", "token", "auth", "authorization", "cookie", "pat", "sas"})
"""A name whose last part (split at anything but letters and digits) is one of these names a credential."""

TOKENIZER_WORDS = frozenset(
    {"eos", "bos", "pad", "unk", "sep", "cls", "mask", "start", "end", "eot", "special", "image", "vocab", "new"}
)
"""`eos_token`, `pad_token`, ...: a tokenizer's special tokens, not credentials."""

SECRET_WORDS = CREDENTIAL_PARTS | {"key"}
"""A flag whose name has one of these as a part is a credential too (`--key X`, `--deploy-key X`)."""


def _parts(name: str) -> list[str]:
    return [p for p in re.split(r"[^a-z0-9]+", name.lower()) if p]


@functools.lru_cache(maxsize=4096)
def credential_name(name: str) -> bool:
    """Whether a config field, an assignment or an environment variable called `name` holds a credential:
    it contains a stem of CREDENTIAL_STEMS or its last part is in CREDENTIAL_PARTS (`max_tokens`,
    `tokenizer`, `text_key`, `token_env`, `RAY_AUTH_MODE` and `eos_token` do not)."""
    parts = _parts(name)
    joined = "".join(parts)
    if any(stem in joined for stem in CREDENTIAL_STEMS):
        return True
    if not parts or parts[-1] not in CREDENTIAL_PARTS:
        return False
    return not (parts[-1] == "token" and len(parts) > 1 and parts[-2] in TOKENIZER_WORDS)


def credential_env_name(name: str) -> bool:
    """Whether the environment variable `name` holds a credential: `credential_name`, or a name ending in
    `_KEY` (`OPENAI_API_KEY`, `GPG_KEY`, `AWS_ACCESS_KEY_ID` is caught by its `ACCESS_KEY`); not `PWD`."""
    if name.upper() in NOT_CREDENTIAL_VARIABLES:
        return False
    return credential_name(name) or _parts(name)[-1:] == ["key"]


NOT_CREDENTIAL_VARIABLES = frozenset({"PWD", "OLDPWD"})
"""The shell's working directories: named like a password (`pwd`), holding a path."""


def _secret_flag(flag: str) -> bool:
    if flag == "-p":
        return True
    name = flag.lstrip("-")
    return credential_name(name) or "key" in _parts(name)


TOKEN_PATTERNS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("an AWS access key id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", ("akia", "asia", "abia", "acca")),
    ("a Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}\b", ("hf_",)),
    ("a GitHub token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    ("a GitHub token", r"\bgithub_pat_[A-Za-z0-9_]{22,}\b", ("github_pat_",)),
    ("a GitLab token", r"\bglpat-[A-Za-z0-9_\-]{20,}", ("glpat-",)),
    ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", ("xox",)),
    ("an API secret key", r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}", ("sk-",)),
    ("a Google API key", r"\bAIza[0-9A-Za-z_\-]{35}\b", ("aiza",)),
    ("a JSON web token", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", ("eyj",)),
    ("a private key", r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----", ("private key",)),
    (
        "an Authorization header",
        r"(?i:\bauthorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?)"
        r"(?P<secret>(?!(?i:bearer|basic|token|digest)\b)[A-Za-z0-9\-._~+/]{6,}=*)",
        ("authorization",),
    ),
    ("a bearer token", r"\b(?i:bearer)\s+(?P<secret>[A-Za-z0-9\-._~+/]{8,}=*)", ("bearer",)),
)
"""Well-known credential shapes (kind, pattern, triggers), found wherever they appear; where a pattern has a
`secret` group only that group is replaced (`Authorization: Bearer <redacted>`). A pattern is tried only on
text whose lowercase holds one of its triggers (a plain substring search, far cheaper than the pattern), and
in a long text only on the lines that do."""

ASSIGNMENT = (
    r"(?i:pass|pwd|secret|token|cred|auth|key|cookie)[\w.\-]*[\"']?\s*[:=]\s*[\"']?(?P<secret>[^\s\"',;&)}\]<>]+)"
)
"""`name=value`, `name: value`, `"name": "value"`: the value is a credential when `credential_name(name)`, the
name running from the word before the match's start (the pattern starts at its stem, which `re` finds fast)."""
ASSIGNMENT_TRIGGERS = ("pass", "pwd", "secret", "token", "cred", "auth", "key", "cookie")

LONG_TEXT = 4096
"""A text longer than this is redacted line by line, only on the lines holding a trigger."""

URL_PASSWORD = r"(?<=[A-Za-z0-9+.\-])://[^:/?#@\s\"']*:(?P<password>[^@/\s\"']+)(?=@)"
"""`scheme://user:PASSWORD@`: the password of a URL's user-info."""

URL_USERINFO = r"(?<=[A-Za-z0-9+.\-])://[^/?#@\s\"']+@"
"""`scheme://USERINFO@`: all of a URL's user-info."""

_PLACEHOLDER = (
    r"^(?:<[^>]*>|\$\{?\w+\}?|\{\w*\}|\*+|\.\.\.|x+|X+|[A-Z][A-Z_]*|None|null|True|False|true|false|\d{1,3})$"
)
"""What documentation writes in place of a password (`<password>`, `$PASS`, `***`, `PASSWORD`), and values that are no
credential (`None`, `true`, a small number): kept."""

_NOT_SECRET_VALUES = frozenset({"bearer", "basic", "digest", "token"})
_VERSION = re.compile(r"v?\d+(?:\.\d+)+[\w.+\-]*")
"""`2.63.0`, `v1.2rc1`: a version, not a credential, as the value of `"google-auth": ...`."""

MIN_REMEMBERED = 6
"""A value shorter than this is not remembered (it is still replaced where it was found): masking every
`true`, `8080` (`-p 8080`) or `text` (`--text_key text`) in every later log line would hide more than it keeps."""

_known: set[str] = set()
_known_lock = threading.Lock()
_known_longest_first: tuple[str, ...] = ()
"""`_known`, longest first (rebuilt when a value is remembered, not per line)."""
_environment_seen: dict[str, str] = {}


@functools.cache
def _shapes() -> tuple[tuple[str, re.Pattern, str | int, tuple[str, ...]], ...]:
    """(kind, compiled pattern, the group it replaces, triggers) of every shape, in the order they apply; the
    credential-named assignment last."""
    shapes = [("URL password", URL_PASSWORD, ("://",))]
    shapes += TOKEN_PATTERNS
    shapes.append(("a credential-named value", ASSIGNMENT, ASSIGNMENT_TRIGGERS))
    out = []
    for kind, pattern, triggers in shapes:
        compiled = re.compile(pattern)
        group = "password" if "password" in compiled.groupindex else "secret" if "secret" in compiled.groupindex else 0
        out.append((kind, compiled, group, triggers))
    return tuple(out)


@functools.cache
def _triggers(assignments: bool) -> tuple[str, ...]:
    """Every shape's triggers in one tuple (with or without the assignment's)."""
    shapes = _shapes() if assignments else [s for s in _shapes() if s[0] != "a credential-named value"]
    return tuple(dict.fromkeys(t for shape in shapes for t in shape[3]))


def _remember(value: str) -> None:
    global _known_longest_first
    if len(value) < MIN_REMEMBERED or value == REDACTED:
        return
    forms = {value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]}
    with _known_lock:
        new = forms - _known
        if new:
            _known.update(new)
            _known_longest_first = tuple(sorted(_known, key=len, reverse=True))


def remember_environment(environ: Mapping[str, str] | None = None) -> None:
    """Remembers the value of every credential-named variable of `environ` (default `os.environ`) at least
    MIN_REMEMBERED long, so that `redact_text` masks it wherever a step prints it."""
    environ = os.environ if environ is None else environ
    for name, value in list(environ.items()):
        if _environment_seen.get(name) == value:
            continue
        _environment_seen[name] = value
        if len(value) >= MIN_REMEMBERED and credential_env_name(name) and not _is_placeholder(value):
            _remember(value)


def redact_text(text: str) -> str:
    """`text` with every value remembered so far, URL passwords, token shapes and credential-named
    assignments replaced."""
    if not text:
        return text
    for value in _known_longest_first:
        if value in text:
            text = text.replace(value, REDACTED)
    return _redact_shapes(text, remember=False)[0]


def redact_value(value):
    """A JSON-like value with `redact_text` applied to every string in it, dictionary keys included."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact_text(k) if isinstance(k, str) else k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value


def redacted_json(value, dump) -> str:
    """`dump(value)` (a JSON text) redacted in one pass (`redact_text` over the whole text); where a
    replacement would break the JSON, `dump` of `value` redacted string by string (`redact_value`)."""
    import json

    text = dump(value)
    redacted = redact_text(text)
    if redacted == text:
        return text
    try:
        json.loads(redacted)
    except ValueError:
        return dump(redact_value(value))
    return redacted


def redact_html(page: str) -> str:
    """An HTML page redacted as `redact_text` does, the marker escaped (`&lt;redacted&gt;`): text a page shows
    is escaped, so a raw `<redacted>` in it can only be one this put there."""
    return redact_text(page).replace(REDACTED, "&lt;redacted&gt;")


def strip_userinfo(text: str) -> str:
    """`text` with the user-info of every URL in it removed (`http://user:PASS@host/x` -> `http://host/x`):
    the form a config value is stored and hashed in."""
    if "@" not in text or "://" not in text:
        return text
    return re.sub(URL_USERINFO, "://", text)


_placeholder = re.compile(_PLACEHOLDER)


def is_placeholder(value: str) -> bool:
    """Whether `value` stands in for a credential rather than being one (`<password>`, `$PASS`, `HF_TOKEN`,
    `None`, a small number)."""
    return value == REDACTED or _placeholder.match(value) is not None


_is_placeholder = is_placeholder


def shapes_in(text: str) -> list[str]:
    """The kinds of credential shape in `text` (URL passwords and token shapes; not assignments), one per place."""
    return _redact_shapes(text, remember=False, assignments=False)[1]


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
            if _secret_flag(name):
                secret = eq and value and not _is_placeholder(value)
                out.append(f"{name}={REDACTED}" if secret else arg)
                if secret:
                    _remember(value)
                    notes.append(name)
                continue
            where, arg = name, value if eq else arg
        elif flag is not None and _secret_flag(flag):
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


def _redact_shapes(text: str, remember: bool = True, assignments: bool = True) -> tuple[str, list[str]]:
    """`text` with URL passwords, token shapes and (with `assignments`) credential-named assignments
    replaced, and what kinds were found (one per place); with `remember`, the values found are redacted from
    every later `redact_text` too."""
    low = text.lower()
    if not any(map(low.__contains__, _triggers(assignments))):
        return text, []
    shapes = [
        shape
        for shape in _shapes()
        if (assignments or shape[0] != "a credential-named value") and any(map(low.__contains__, shape[3]))
    ]
    if not shapes:
        return text, []
    found: list[str] = []
    if len(text) <= LONG_TEXT or len(low) != len(text):
        return _apply(text, shapes, remember, found), found
    spans = sorted({_line_of(low, i) for _, _, _, triggers in shapes for t in triggers for i in _finds(low, t)})
    out, pos = [], 0
    for start, end in spans:
        if start < pos:
            continue
        out += [text[pos:start], _apply(text[start:end], shapes, remember, found)]
        pos = end
    out.append(text[pos:])
    return "".join(out), found


def _finds(text: str, sub: str):
    i = text.find(sub)
    while i >= 0:
        yield i
        i = text.find(sub, i + len(sub))


def _line_of(text: str, i: int) -> tuple[int, int]:
    end = text.find("\n", i)
    return text.rfind("\n", 0, i) + 1, len(text) if end < 0 else end


_NAME_TAIL = re.compile(r"[\w.\-]*")
_NAME_HEAD = re.compile(r"[\w.\-]*$")


def _assigned_name(m: re.Match) -> str:
    """The whole name an assignment's match starts inside (`db_password` for a match at `password`)."""
    head = _NAME_HEAD.search(m.string, max(0, m.start() - 200), m.start())
    return m.string[head.start() : m.start()] + _NAME_TAIL.match(m.string, m.start())[0]


def _apply(text: str, shapes: list, remember: bool, found: list[str]) -> str:
    for kind, pattern, group, _ in shapes:

        def sub(m: re.Match, kind=kind, group=group) -> str:
            value = m[group]
            if _is_placeholder(value):
                return m[0]
            if kind == "a credential-named value" and (
                not credential_name(_assigned_name(m))
                or value.lower() in _NOT_SECRET_VALUES
                or _VERSION.fullmatch(value)
            ):
                return m[0]
            if remember:
                _remember(value)
            found.append(kind)
            start, end = m.span(group)
            return m[0][: start - m.start()] + REDACTED + m[0][end - m.start() :]

        text = pattern.sub(sub, text)
    return text


@dataclass(frozen=True)
class PatchFinding:
    """A credential-shaped string on a line of code that a run would store."""

    file: str
    """The file's path (in the checkout, as the patch names it; or the script's absolute path)."""
    line: int
    """Its line number in the new version of the file."""
    kind: str
    """What it looks like: 'a Hugging Face token', 'a URL password', ..."""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.kind}"


_HUNK = r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,\d+)? @@"

_QUOTED_ASSIGNMENT = r"(?P<name>\b[A-Za-z_][\w.\-]*)[\"']?\s*[:=]\s*(?P<q>[\"'])(?P<secret>[^\"'\s<>{}$]{12,})(?P=q)"
"""In code: a credential-named name given a literal string of 12 or more characters (`API_KEY = "..."`)."""


def _line_kinds(line: str) -> list[str]:
    """What a line of code holds that looks like a credential: token shapes, URL passwords, and a
    credential-named name assigned a string literal (not secret-named words alone, which code names all the
    time: `password = os.environ["DB_PASSWORD"]` is fine)."""
    kinds = _redact_shapes(line, remember=False, assignments=False)[1]
    for m in re.finditer(_QUOTED_ASSIGNMENT, line) if not kinds else ():
        if credential_name(m["name"]) and not _is_placeholder(m["secret"]):
            kinds.append("a credential-named string")
    return [("a " + k if k == "URL password" else k) for k in dict.fromkeys(kinds)]


def find_in_patch(patch: bytes) -> list[PatchFinding]:
    """The credential-shaped strings on the lines a `git diff` patch adds (`_line_kinds`)."""
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
            findings += [PatchFinding(file, line, k) for k in _line_kinds(raw[1:])]
            line += 1
        elif raw.startswith(" "):
            line += 1
    return findings


def find_in_source(source: bytes, file: str) -> list[PatchFinding]:
    """The credential-shaped strings on any line of a source file that a run stores whole (`_line_kinds`)."""
    return [
        PatchFinding(file, number, kind)
        for number, line in enumerate(source.decode("utf-8", "replace").splitlines(), 1)
        for kind in _line_kinds(line)
    ]


class CredentialInPatchError(ValueError):
    """The code a run would store under its prefix (its working-tree patch, a script outside the checkout)
    holds something credential-shaped."""

    def __init__(self, findings: Sequence[PatchFinding]):
        shown = "; ".join(str(f) for f in findings[:5]) + (
            f" and {len(findings) - 5} more" if len(findings) > 5 else ""
        )
        super().__init__(
            "the code this run would store under the prefix (its uncommitted changes, its scripts outside the "
            f"checkout) holds something credential-shaped: {shown}. Remove it (the code is stored verbatim, for "
            "reruns; pass credentials through the environment), or pass --allow_credentials_in_patch if it is "
            "not a credential"
        )
        self.findings = list(findings)
