"""Lineage: what a step's output was made from, down to its downloads, and what used it, across labs.

    marin lineage lab-b/tokenized/shakespeare-1a2b3c4d --prefix lab-a --prefix lab-b

*Made from* follows each step's `.executor_info`: its dependencies (by identity, `<name>-<hash>`, found
under the prefix it lives in), and, for an output reused from another lab, the folder and record it was
verified against (`reused_from`). Every step is shown with the digest of its manifest and its source-like
config fields (a download's source, revision, glob; a shipped corpus's plays); the walk ends at the steps
without dependencies.

*Used by* reads the experiment records under each prefix given: a step whose version lists the
output's identity among its dependencies consumed it, and so did everything downstream of that step.
The identity, not the path, is the key: the same `<name>-<hash>` in another lab is the same step
(the prefix never enters a hash), whether that lab ran it or reused it.

Only records and executor files are read (marin.storage), so the CLI and the browser share this module.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from marin.storage import join, list_dir, read_bytes, read_bytes_many
from marin.storage.layout import (
    EXPERIMENTS_DIR,
    HASH_PATTERN,
    INFO_FILE,
    MANIFEST_FILE,
    STATUS_FILE,
    is_record_name,
)

SOURCE_FIELDS = (
    "source",
    "url",
    "urls",
    "revision",
    "files",
    "glob",
    "repo",
    "dataset",
    "plays",
    "checksum",
    "sha256",
    "expected_sha256",
)
"""Config fields that say where a step's data came from (a download's source and revision, a shipped corpus's
plays), shown for every step that has them."""


@dataclass
class Node:
    """One step output in a lineage walk."""

    path: str
    """The output folder (a full path or URL)."""
    identity: str
    """`<name>-<hash>`."""
    state: str | None = None
    fn: str | None = None
    reused_from: dict | None = None
    """The `reused_from` of its `.executor_info`: the source folder, record and manifest digest."""
    source: dict = field(default_factory=dict)
    """Its source-like config fields (SOURCE_FIELDS), when it has any."""
    manifest_sha256: str | None = None
    files: int = 0
    total_bytes: int = 0
    inputs: list[Node] = field(default_factory=list)
    error: str | None = None


def _load(data: bytes | None) -> dict | None:
    try:
        value = json.loads(data) if data else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def prefix_of(path: str, info: dict) -> str:
    """The prefix an output lives under, from its path and its relative output path."""
    rel = info.get("relative_output_path") or f"{info.get('name')}-{info.get('hash')}"
    path = path.rstrip("/")
    return path[: -len(rel) - 1] if path.endswith("/" + rel) else str(info.get("prefix") or "")


def _dependency_identities(info: dict) -> list[str]:
    deps = (info.get("version") or {}).get("dependencies")
    if isinstance(deps, list) and all(isinstance(d, str) for d in deps):
        return list(deps)
    prefix = str(info.get("prefix") or "")
    return [str(d).removeprefix(prefix).lstrip("/") for d in info.get("dependencies") or []]


def made_from(path: str, _seen: dict | None = None) -> Node:
    """The lineage tree of the output at `path` (each shared input appears once, then by reference)."""
    seen = {} if _seen is None else _seen
    path = path.rstrip("/")
    if path in seen:
        return seen[path]
    info_data, status, manifest_data = read_bytes_many(
        [join(path, INFO_FILE), join(path, STATUS_FILE), join(path, MANIFEST_FILE)]
    )
    info = _load(info_data)
    name = path.rsplit("/", 1)[-1]
    if info is None:
        node = seen[path] = Node(path=path, identity=name, error=f"no {INFO_FILE} at {path}")
        return node
    manifest = _load(manifest_data) or {}
    node = seen[path] = Node(
        path=path,
        identity=f"{info.get('name')}-{info.get('hash')}",
        state=status.decode("utf-8", "replace").strip() if status else None,
        fn=info.get("fn"),
        reused_from=info.get("reused_from") if isinstance(info.get("reused_from"), dict) else None,
        manifest_sha256=hashlib.sha256(manifest_data).hexdigest() if manifest_data else None,
        files=len(manifest.get("files") or []),
        total_bytes=int(manifest.get("total_size") or 0),
    )
    deps = _dependency_identities(info)
    if isinstance(info.get("config"), dict):
        node.source = {k: v for k, v in info["config"].items() if k in SOURCE_FIELDS and v not in (None, "", [], ())}
    base = prefix_of(path, info)
    for identity in deps:
        node.inputs.append(made_from(join(base, identity), seen))
    return node


@dataclass
class Use:
    """A step in some lab's experiment record that consumed the output, directly or through another step."""

    prefix: str
    record: str
    """The experiment record's path."""
    experiment: str
    identity: str
    """The consuming step's `<name>-<hash>`."""
    direct: bool
    """It lists the output among its own dependencies (else it uses a step that does)."""


def _records(prefix: str) -> list[tuple[str, dict]]:
    folder = join(prefix, EXPERIMENTS_DIR)
    names = [n for n in list_dir(folder) if is_record_name(n)]
    paths = [join(folder, n) for n in names]
    return [(p, r) for p, r in zip(paths, (_load(d) for d in read_bytes_many(paths)), strict=True) if r]


def used_by(identity: str, prefixes: list[str]) -> list[Use]:
    """Every step, in every record under `prefixes`, downstream of the step `identity`."""
    uses = []
    for prefix in prefixes:
        for path, record in _records(prefix):
            steps = [s for s in record.get("steps") or [] if isinstance(s, dict)]
            deps = {f"{s.get('name')}-{s.get('hash')}": set(_dependency_identities(s)) for s in steps}
            reached: dict[str, bool] = {}
            frontier = [identity]
            while frontier:
                current = frontier.pop()
                for step, its in deps.items():
                    if current not in its:
                        continue
                    if step not in reached:
                        reached[step] = current == identity
                        frontier.append(step)
                    elif current == identity:
                        reached[step] = True
            for step, direct in sorted(reached.items()):
                uses.append(Use(prefix, path, str(record.get("name") or ""), step, direct))
    return uses


def identity_of(path: str) -> str:
    """`<name>-<hash>` of an output folder, from its `.executor_info` (else from its folder name)."""
    info = _load(read_bytes(join(path.rstrip("/"), INFO_FILE)))
    if info and info.get("name") and info.get("hash"):
        return f"{info['name']}-{info['hash']}"
    match = HASH_PATTERN.match(path.rstrip("/").rsplit("/", 1)[-1])
    if not match:
        raise ValueError(f"{path} is not a step output (no {INFO_FILE}, no <name>-<hash> folder name)")
    return path.rstrip("/").rsplit("/", 1)[-1]


def render_text(node: Node, uses: list[Use], prefixes: list[str]) -> str:
    """`marin lineage`'s output."""
    lines = ["made from:"]
    shown: set[str] = set()

    def walk(n: Node, depth: int) -> None:
        pad = "  " * (depth + 1)
        if n.error:
            lines.append(f"{pad}{n.identity}  ({n.error})")
            return
        again = n.path in shown
        shown.add(n.path)
        size = f"{n.files} files, {n.total_bytes:,} bytes" if n.manifest_sha256 else "no manifest"
        digest = f"manifest {n.manifest_sha256[:16]}" if n.manifest_sha256 else ""
        lines.append(f"{pad}{n.identity}  {n.state or '-'}  {n.path}  ({size}{', ' + digest if digest else ''})")
        if again:
            if n.inputs:
                lines.append(f"{pad}  (inputs shown above)")
            return
        if n.reused_from:
            r = n.reused_from
            lines.append(
                f"{pad}  reused ({r.get('mode')}) from {r.get('path')}, record {r.get('record')}, "
                f"manifest {str(r.get('manifest_sha256'))[:16]}"
            )
        if n.source:
            lines.append(f"{pad}  source: " + ", ".join(f"{k}={v}" for k, v in n.source.items()))
        for child in n.inputs:
            walk(child, depth + 1)

    walk(node, 0)
    lines.append(f"used by ({len(prefixes)} prefix{'es' if len(prefixes) != 1 else ''}):")
    if not uses:
        lines.append("  nothing under " + ", ".join(prefixes))
    for u in uses:
        how = "directly" if u.direct else "downstream"
        lines.append(f"  {u.identity}  {how}  in {u.experiment} ({u.record})")
    return "\n".join(lines)


def lineage_main(path: str, prefixes: list[str] | None = None) -> int:
    """`marin lineage PATH [--prefix P ...]`: without prefixes, the output's own prefix is searched."""
    node = made_from(path)
    if node.error:
        print(f"error: {node.error}")
        return 2
    if not prefixes:
        info = _load(read_bytes(join(path.rstrip("/"), INFO_FILE))) or {}
        prefixes = [prefix_of(path, info)]
    print(render_text(node, used_by(node.identity, prefixes), prefixes))
    return 0


def lineage_html(roots, index: int, rel: str) -> str:
    """The step page's "Made from" and "Used by": links follow reuse into whichever served root holds the source."""
    from marin.browser.html import esc, fmt_size, note, table, url_step

    root = roots.get(index)
    here = root.path if root.is_local else root.url.rstrip("/")
    node = made_from(f"{here}/{rel}")
    if node.error:
        return note(node.error)

    def link(path: str, text: str) -> str:
        found = roots.locate(path)
        if found is None:
            return f'<code title="not under a served root">{esc(text)}</code>'
        i, r = found
        lab = f' <span class="lab">{esc(roots.label(i))}</span>' if len(roots) > 1 else ""
        return f'<a href="{esc(url_step(i, r))}"><code>{esc(text)}</code></a>{lab}'

    shown: set[str] = set()

    def item(n: Node) -> str:
        if n.error:
            return f"<li><code>{esc(n.identity)}</code> <span class='bad'>{esc(n.error)}</span></li>"
        parts = [link(n.path, n.identity), f'<span class="muted">{esc(n.state or "-")}</span>']
        if n.manifest_sha256:
            parts.append(
                f'<span class="muted">{n.files} files, {fmt_size(n.total_bytes)}, manifest '
                f"<code>{esc(n.manifest_sha256[:12])}</code></span>"
            )
        if n.reused_from:
            r = n.reused_from
            parts.append(f"reused ({esc(r.get('mode'))}) from {link(str(r.get('path')), str(r.get('path')))}")
        if n.source:
            parts.append("source " + esc(", ".join(f"{k}={v}" for k, v in n.source.items())))
        again = n.path in shown
        shown.add(n.path)
        inner = "" if again or not n.inputs else "<ul>" + "".join(item(c) for c in n.inputs) + "</ul>"
        return "<li>" + " · ".join(parts) + inner + "</li>"

    made = '<h3>Made from</h3><ul class="lineage">' + item(node) + "</ul>"
    prefixes = [r.path if r.is_local else r.url.rstrip("/") for r in roots]
    uses = used_by(node.identity, prefixes)
    rows = []
    for u in uses:
        found = roots.locate(u.prefix)
        i = found[0] if found else index
        step_path = f"{u.prefix}/{u.identity}"
        rows.append(
            [
                esc(roots.label(i)),
                esc(u.experiment),
                link(step_path, u.identity),
                "directly" if u.direct else "downstream",
            ]
        )
    used = "<h3>Used by</h3>" + (
        table(["lab", "experiment", "step", "how"], rows, cls="data used-by")
        if rows
        else note("no experiment record under the served roots uses this output")
    )
    return made + used
