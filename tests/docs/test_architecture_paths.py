"""docs/architecture.md's "Which module to open" table names files that exist.

A path in backticks is read under ``dashboard/`` (``store/lifecycle/claim.py``) or, for the
top-level folders (``templates/``, ``static/``, ``migrations/``), under the repository's root.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
TOP_LEVEL = ("templates/", "static/", "migrations/", "tests/", "bench/", "docs/")
PATHLIKE = re.compile(r"^[\w./*-]+(\.py|\.sql|\.html|\.js|\.css|/)$")


def table_paths() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    table = text.split("## Which module to open", 1)[1].split("\n## ", 1)[0]
    found = []
    for cell in re.findall(r"`([^`]+)`", table):
        if PATHLIKE.match(cell) and "*" not in cell and not cell.startswith("/"):
            found.append(cell)
    return found


def where(path: str) -> Path:
    return ROOT / path if path.startswith(TOP_LEVEL) else ROOT / "dashboard" / path


def test_the_table_names_many_paths():
    assert len(table_paths()) > 60  # the parser reads the table, not an empty slice of it


def test_every_path_the_table_names_exists():
    missing = [path for path in table_paths() if not where(path).exists()]
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"
