"""The README is a front page: short, its two commands first, and every link it holds resolves.
The same link check covers the documentation pages, and no page carries the project's history."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HISTORY = re.compile(r"issue [0-9]+|round (one|two|three|four|five|six|seven)", re.IGNORECASE)
RUN = "python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt && honcho start"
TEST = "./scripts/test"


def relative_links(text: str) -> list[str]:
    """The targets of Markdown links and images that point into the repository."""
    targets = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # http:, mailto:, an anchor on the same page
        targets.append(target.split("#", 1)[0])
    return targets


def broken_links(page: Path) -> list[str]:
    return [
        target
        for target in relative_links(page.read_text(encoding="utf-8"))
        if not (page.parent / target).resolve().exists()
    ]


def test_readme_is_a_front_page_of_at_most_250_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines"
    blocks = re.findall(r"```sh\n(.*?)\n```", "\n".join(lines), re.S)
    assert blocks[:2] == [RUN, TEST], "the README must open with the run and the test commands"
    text = "\n".join(lines)
    for heading in ("## What it guarantees", "## Where to read next"):
        assert heading in text
    assert "docs/assets/screenshots/" in text, "the front page shows a screenshot"


def test_every_relative_link_of_the_readme_resolves() -> None:
    links = relative_links(README.read_text(encoding="utf-8"))
    assert len(links) >= 15, links  # the table of where to read next, at least
    assert broken_links(README) == []


def test_the_link_check_finds_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x")
    page.write_text("[ok](there.md) [gone](missing.md#a) ![img](a/b.png) [web](https://example.org/x)")
    assert broken_links(page) == ["missing.md", "a/b.png"]


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_page_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_no_history_in_the_readme_or_the_docs() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in [README, *sorted(DOCS.rglob("*.md"))]
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert found == [], "history belongs in CHANGELOG.md:\n" + "\n".join(found)
