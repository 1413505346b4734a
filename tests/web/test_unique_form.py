"""The create form's unique key, window, states and debounce; the job page shows the key."""

from __future__ import annotations

import re

from dashboard.store.reads import lists as find_jobs


def _form(token: str, **fields: str) -> dict[str, str]:
    base = {
        "csrf_token": token,
        "type": "demo.success",
        "payload": "{}",
        "priority": "50",
        "max_attempts": "3",
    }
    return {**base, **fields}


def test_the_form_creates_a_keyed_job_and_returns_it_while_live(app, client, token):
    data = _form(token, unique_key="report:42", unique_for="3600", unique_while="queued")
    first = client.post("/jobs/new/", data=data)
    assert first.status_code == 303
    [job] = find_jobs.list_jobs(limit=10, offset=0).results
    assert (job.unique_key, job.unique_for, job.unique_while) == ("report:42", 3600.0, "queued")
    again = client.post("/jobs/new/", data={**data, "payload": '{"v": 2}'})
    assert again.headers["Location"] == first.headers["Location"]
    page = client.get(again.headers["Location"]).get_data(as_text=True)
    assert "A job with this unique key already exists" in page
    shown = re.search(r'data-field="unique-key">(.*?)</dd>', page, re.S)
    assert shown and "report:42" in shown.group(1) and "held while queued" in shown.group(1)
    assert "3600.0 s after its creation" in shown.group(1)
    assert find_jobs.list_jobs(limit=10, offset=0).count == 1


def test_the_form_debounces(app, client, token):
    data = _form(token, unique_key="burst", debounce="30")
    client.post("/jobs/new/", data=data)
    client.post("/jobs/new/", data={**data, "payload": '{"v": 2}'})
    [job] = find_jobs.list_jobs(limit=10, offset=0).results
    assert job.payload == {"v": 2} and job.unique_while == "queued"


def test_bad_unique_options_are_inline_errors(app, client, token):
    cases = [
        ({"unique_key": "k" * 256}, "unique_key", "255"),
        ({"unique_key": "k", "unique_for": "-1"}, "unique_for", "between"),
        ({"unique_key": "k", "unique_for": "0"}, "unique_for", "above 0"),
        ({"unique_key": "k", "unique_for": "soon"}, "unique_for", "Not a valid float"),
        ({"unique_for": "10"}, "unique_for", "unique key"),
        ({"unique_key": "k", "unique_while": "done"}, "unique_while", "Not a valid choice"),
        ({"debounce": "5"}, "debounce", "needs a unique key"),
        ({"unique_key": "k", "debounce": "5", "delay": "3"}, "debounce", "leave the delay"),
    ]
    for fields, name, message in cases:
        response = client.post("/jobs/new/", data=_form(token, **fields))
        html = response.get_data(as_text=True)
        assert response.status_code == 400, fields
        error = re.search(rf'<div class="error" id="{name}-error"><p>([^<]*)</p>', html)
        assert error and message in error.group(1), (fields, error and error.group(1))
    assert find_jobs.list_jobs(limit=10, offset=0).count == 0
