"""The README and docs/ hold together: every relative link points to a file of the repository, every
anchor to a heading of the page it names (as GitHub makes a heading's anchor), and the README
stays short."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation and symbols dropped (not ``_`` or ``-``),
    spaces to hyphens."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a markdown page's headings (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    result: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def links(page: Path) -> list[str]:
    """The relative links of a page, outside code blocks."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def test_slug_is_githubs() -> None:
    assert slug("§2.5 Statuses and verdicts (all judges)") == "25-statuses-and-verdicts-all-judges"
    assert slug("`calibrations` columns") == "calibrations-columns"
    assert slug("`human_labels`") == "human_labels"
    assert slug("The provider: key and rate limits") == "the-provider-key-and-rate-limits"


def test_the_check_finds_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [bad](#nothing) [file](missing.md)\n```\n[code](x.md)\n```\n")
    assert links(page) == ["#title", "#nothing", "missing.md"]
    assert anchors(page) == {"title"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with anchor #{anchor} in {file.name}")
    assert not broken, broken


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {Path(target.partition("#")[0]).name for target in links(REPO / "README.md")}
    assert {page.name for page in PAGES[1:]} <= linked


def test_the_readme_is_short() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < 250, f"README.md has {lines} lines: move details into docs/"
