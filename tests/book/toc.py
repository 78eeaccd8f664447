"""The book's table of contents, read once for the page checks and the browser tests."""

from __future__ import annotations

from pathlib import Path

import yaml

TOC = Path(__file__).resolve().parents[2] / "notebooks" / "_toc.yml"


def toc_docnames(path: Path = TOC) -> list[str]:
    """The root and every file of a jb-book table of contents, in reading order."""
    toc = yaml.safe_load(path.read_text(encoding="utf-8"))
    names = [toc["root"]]

    def walk(entries: list[dict]) -> None:
        for entry in entries:
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    walk(toc.get("chapters", []))
    return names
