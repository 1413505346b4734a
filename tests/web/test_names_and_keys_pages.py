"""The dashboard's and the command line's names and keys: a queue named only with dots, an
idempotency key with control or bidi characters and a time past what the store reads back are
refused inline (nothing written); the Queues page and `flask queues` say when the list is cut
short, paused queues always in it; schedule pause and resume from the page and the command line
leave their audit rows, shown on the audit page."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.flow.schedules import Declaration, sync
from dashboard.store.reads import queues as read_queues
from tests.support.forms import csrf_token
from tests.support.timelines import table_snapshot


def form(token: str, **fields: str) -> dict[str, str]:
    return {"csrf_token": token, "type": "demo.success", "payload": "{}", "priority": "50",
            "max_attempts": "3", **fields}  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"queue": ".."}, "queue", "must not be made only of dots"),
        ({"queue": "."}, "queue", "must not be made only of dots"),
        ({"idempotency_key": "order\u202e7"}, "idempotency_key", "U+202E"),
        ({"idempotency_key": "\u200eorder"}, "idempotency_key", "U+200E"),
        ({"idempotency_key": "a\u0007b"}, "idempotency_key", "U+0007"),
        ({"idempotency_key": "a\u0085b"}, "idempotency_key", "U+0085"),
        ({"idempotency_key": "a\u2067b"}, "idempotency_key", "U+2067"),
        ({"available_at": "9999-12-31T23:59:59+00:00"}, "available_at", "1900 to 9998"),
        ({"available_at": "9999-06-01T00:00"}, "available_at", "1900 to 9998"),
        ({"available_at": "0001-01-01T00:00"}, "available_at", "1900 to 9998"),
        ({"available_at": "1899-12-31T23:59:59+00:00"}, "available_at", "1900 to 9998"),
    ],
)
def test_the_create_form_refuses_them_inline_and_writes_nothing(client, token, fields, field, says):
    before = table_snapshot()
    response = client.post("/jobs/new/", data=form(token, **fields))
    html = response.get_data(as_text=True)
    assert response.status_code == 400 and f'id="{field}-error"' in html
    assert says in html.split(f'id="{field}-error"')[1][:400]
    assert table_snapshot() == before


def test_the_form_keeps_a_visible_key_and_the_edges_of_the_years(client, token):
    made = client.post(
        "/jobs/new/",
        data=form(token, idempotency_key="commande-été 7", available_at="9998-12-31T23:59:59-14:00"),
    )
    assert made.status_code == 303
    assert client.get(made.headers["Location"]).status_code == 200


def queue_count() -> int:
    with db.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM jobs_queue")).scalar_one())


@pytest.mark.parametrize("name", ["..", ".", "%2E%2E", "..."])
def test_the_queue_forms_refuse_a_name_made_only_of_dots(client, name):
    token = csrf_token(client, "/queues/")
    for action in ("pause", "resume", "limits"):
        response = client.post(
            f"/queues/{name}/{action}/",
            data={"csrf_token": token, "concurrency_limit": "1"},
            follow_redirects=True,
        )
        assert response.status_code == 200
        assert "Nothing changed: the queue name must not be made only of dots" in response.get_data(
            as_text=True
        )
    assert queue_count() == 0


def test_flask_queues_refuses_a_name_made_only_of_dots(app):
    for name in (".", ".."):
        result = app.test_cli_runner().invoke(args=["queues", "pause", name])
        assert result.exit_code == 2 and "only of dots" in result.output
    assert queue_count() == 0


def many_queues(names: list[str], paused: list[str]) -> None:
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs_queue (name, created_at, paused) "
                "SELECT n, now(), n = ANY(:paused) FROM unnest(CAST(:names AS text[])) AS n"
            ),
            {"names": names, "paused": paused},
        )


def test_the_page_and_the_command_say_when_the_list_is_cut_short(app, client, monkeypatch):
    many_queues(["a", "b", "c", "d", "zz-paused"], paused=["zz-paused"])
    html = client.get("/queues/").get_data(as_text=True)
    assert 'data-truncated="true"' not in html and html.count('data-queue="') == 5
    monkeypatch.setattr(read_queues, "QUEUES_SHOWN", 3)
    html = client.get("/queues/").get_data(as_text=True)
    assert 'data-truncated="true"' in html and "Showing 3 of 5 queues" in html
    assert 'data-queue="zz-paused"' in html and html.count('data-queue="') == 3
    listing = app.test_cli_runner().invoke(args=["queues"]).output
    assert [line.split()[0] for line in listing.splitlines()[1:4]] == ["a", "b", "zz-paused"]
    assert "showing 3 of 5 queues: the paused ones first" in listing


TICK = Declaration("tick", "* * * * *", "UTC", "demo.success", {}, "default", 50, 3)


def audit_rows() -> list[tuple[str, str, str]]:
    with db.engine.connect() as conn:
        rows = conn.execute(text("SELECT action, actor, data FROM jobs_audit ORDER BY id")).all()
    return [(action, actor, data.get("source", "")) for action, actor, data in rows]


def test_schedule_pause_and_resume_from_the_page_are_in_the_audit_log(app, client):
    sync([TICK])
    token = csrf_token(client, "/schedules/")
    for action in ("pause", "pause", "resume"):
        assert client.post(f"/schedules/tick/{action}/", data={"csrf_token": token}).status_code == 303
    assert [row[0] for row in audit_rows()] == ["schedule_paused", "schedule_resumed"]
    log = client.get("/audit/").get_data(as_text=True)
    assert 'data-audit="schedule_paused"' in log and "schedule paused" in log and "schedule resumed" in log
    assert 'href="/schedules/#schedule-tick"' in log


def test_schedule_pause_and_resume_from_the_command_line_are_in_the_audit_log(app):
    sync([TICK])
    runner = app.test_cli_runner()
    for action in ("pause", "pause", "resume", "resume"):
        assert runner.invoke(args=["schedules", action, "tick"]).exit_code == 0
    rows = audit_rows()
    assert [row[0] for row in rows] == ["schedule_paused", "schedule_resumed"]
    assert all(actor.startswith("cli") and source == "cli" for _, actor, source in rows)
