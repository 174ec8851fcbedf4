"""MkDocs hook: the pages link to files of the repository outside docs/ (`../deploy/...`,
`../CONTRIBUTING.md`) so that they work on GitHub. The site does not carry those files: a link to
one that exists becomes the link's text on the site (or a link into `repo_url` when mkdocs.yml sets
one); a link to one that does not exist is left as it is, for MkDocs to report (and `--strict` to
fail on)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<target>[^)\s]+)\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = Path(os.path.abspath(config["docs_dir"]))
    root = docs.parent
    source = (docs / page.file.src_path).parent
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def outside(match: re.Match[str]) -> str:
        target = match.group("target")
        if re.match(r"[a-z]+:|#|/", target):
            return match.group(0)
        path = Path(os.path.normpath(source / target.split("#", 1)[0]))
        if path.is_relative_to(docs) or not path.is_relative_to(root) or not path.exists():
            return match.group(0)
        if repo_url:
            return f"[{match.group('text')}]({repo_url}/blob/main/{path.relative_to(root).as_posix()})"
        return match.group("text")

    return LINK.sub(outside, markdown)
