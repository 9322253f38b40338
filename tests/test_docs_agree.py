"""What the docs say about the tools agrees with the tools: the browser's port, and what installs Chromium."""

from __future__ import annotations

import glob
import os
import re

from marin.cli import build_parser
from tests.cli_support import REPO


def _pages() -> dict[str, str]:
    paths = [os.path.join(REPO, "README.md"), *sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))]
    return {os.path.relpath(p, REPO): open(p).read() for p in paths}


def _browse_default_port() -> int:
    browse = build_parser()._subparsers._group_actions[0].choices["browse"]
    return next(a.default for a in browse._actions if "--port" in a.option_strings)


def test_every_browse_command_in_the_docs_names_the_port_it_binds():
    default = _browse_default_port()
    checked = 0
    for page, text in _pages().items():
        for line in text.splitlines():
            command, _, comment = line.partition("# ")
            if "marin browse " not in command or "http://" not in comment:
                continue
            given = re.search(r"--port (\d+)", command)
            port = int(given[1]) if given else default
            shown = re.search(r"http://[\w.]+:(\S+?)(/|,|\s|$)", comment)
            assert shown and shown[1] == str(port), f"{page}: {line.strip()!r} binds {port}"
            checked += 1
    assert checked >= 2


def test_the_docs_say_which_make_target_installs_the_browser_the_screenshot_tests_use():
    make = open(os.path.join(REPO, "Makefile")).read()
    targets = dict(re.findall(r"^([\w-]+):([^\n=]*)$", make, re.M))
    assert "browser-deps" in targets and "chromium" in make.split("browser-deps:")[1].split("\n\n")[0].lower()
    assert "browser-deps" not in targets["run"] and "browser-deps" in targets["test"]
    support = open(os.path.join(REPO, "tests", "browser_support.py")).read()
    assert "run make browser-deps" in support
    pages = _pages()
    for page in ("README.md", "docs/testing.md", "docs/browser.md"):
        text = " ".join(pages[page].split())
        assert "make browser-deps" in text and "make run" in text, page
