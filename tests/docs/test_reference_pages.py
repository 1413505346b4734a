"""The generated reference pages match what ``python -m scripts.docs`` writes, and the
configuration page lists every setting the application reads."""

from __future__ import annotations

from dataclasses import fields

import pytest

from dashboard.config import OpsSettings, Settings, WorkerSettings
from scripts import docs

STALE = "docs/reference/{} is stale: run `python -m scripts.docs` and commit it"


def test_every_setting_has_one_description_on_its_field() -> None:
    """The description is written once, on the field (``env(..., doc=...)``): the page and the
    ``flask worker`` options read it there."""
    specs = [spec for cls in (Settings, WorkerSettings, OpsSettings) for spec in fields(cls)]
    assert [spec.name for spec in specs if "env" not in spec.metadata] == ["worker", "ops"]
    assert [spec.metadata["env"] for spec in specs if not spec.metadata.get("doc", "-")] == []
    page = docs.configuration_page()
    for spec in specs:
        if "env" in spec.metadata:
            assert docs.cell(spec.metadata["doc"]) in page, spec.metadata["env"]


def test_the_configuration_page_lists_every_setting() -> None:
    page = docs.CONFIGURATION_PAGE.read_text(encoding="utf-8")
    missing = [name for name in docs.setting_names() if f"| `{name}` |" not in page]
    assert missing == [], f"not on docs/reference/configuration.md: {missing}"
    assert len(docs.setting_names()) >= 60


def test_the_configuration_page_is_what_the_generator_writes() -> None:
    assert docs.CONFIGURATION_PAGE.read_text(encoding="utf-8") == docs.configuration_page(), STALE.format(
        "configuration.md"
    )


def test_the_configuration_page_never_shows_a_secret_default() -> None:
    from dashboard.config import DEV_SECRET_KEY

    assert DEV_SECRET_KEY not in docs.configuration_page()


def test_the_api_page_is_what_the_generator_writes() -> None:
    assert docs.API_PAGE.read_text(encoding="utf-8") == docs.api_page(), STALE.format("jobqueue_api.md")


def test_the_api_page_has_every_operation_of_the_served_document() -> None:
    document = docs.openapi_document()
    page = docs.API_PAGE.read_text(encoding="utf-8")
    operations = [f"`{method.upper()} {path}`" for path, ops in document["paths"].items() for method in ops]
    assert len(operations) >= 15
    assert [op for op in operations if op not in page] == []
    assert [name for name in document["components"]["schemas"] if f"{{#schema-{name}}}" not in page] == []


def test_the_check_mode_reports_a_stale_page(tmp_path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text("# Configuration\n\nedited by hand\n")
    monkeypatch.setattr(docs, "ROOT", tmp_path)
    monkeypatch.setattr(docs, "pages", lambda: {stale: docs.configuration_page()})
    assert docs.main(["--check"]) == 1
    assert "is stale" in capsys.readouterr().err
    assert stale.read_text() == "# Configuration\n\nedited by hand\n"  # --check writes nothing
    assert docs.main([]) == 0
    assert docs.main(["--check"]) == 0
