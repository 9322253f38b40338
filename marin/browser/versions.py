"""A step's other versions: the sibling folders `<name>-<other hash>`, linked to the compare page.

Apart from `compare` so that the step page can link to comparisons while the compare page reads
steps through `step_pages`, with no import cycle.
"""

from __future__ import annotations

from urllib.parse import urlencode

from marin.browser.html import esc
from marin.browser.storage import list_dir
from marin.storage.layout import HASH_PATTERN as HASHED


def compare_links(roots, index: int, rel: str) -> str:
    """Buttons to compare this step with its other versions (sibling folders `<name>-<other hash>`)."""
    m = HASHED.match(rel.rsplit("/", 1)[-1])
    if not m:
        return ""
    root = roots.get(index)
    parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
    try:
        siblings = list_dir(root.fs, root.join(parent))
    except FileNotFoundError:
        return ""
    others = []
    for e in siblings:
        nm = e["name"].rstrip("/").rsplit("/", 1)[-1]
        mm = HASHED.match(nm)
        if e.get("type") == "directory" and mm and mm["base"] == m["base"] and nm != m.string:
            other = f"{parent}/{nm}" if parent else nm
            others.append(
                f'<a class="btn" href="{esc(f"/compare/{index}?" + urlencode({"a": rel, "b": other}))}">'
                f"compare with {esc(mm['hash'])}</a>"
            )
    if not others:
        return ""
    return (
        '<div class="toolbar compare-links"><span class="muted">other versions of this step:</span>'
        + "".join(others)
        + "</div>"
    )
