"""``Authorization: Bearer <token>`` is read once (``auth/bearer.py``): the JSON API and
``/metrics`` accept and refuse exactly the same spellings."""

from __future__ import annotations

import pytest

from dashboard.auth.bearer import BearerError, bearer_token
from tests.support.secured import VIEWER_TOKEN, build

ACCEPTED = [
    f"Bearer {VIEWER_TOKEN}",
    f"bearer {VIEWER_TOKEN}",
    f"BEARER {VIEWER_TOKEN}",
    f"  Bearer   {VIEWER_TOKEN}  ",
]
REFUSED = [
    None,
    "",
    "Bearer",
    "Bearer ",
    f"Basic {VIEWER_TOKEN}",
    f"Bearer {VIEWER_TOKEN} extra",
    f"Token {VIEWER_TOKEN}",
    f"Bearer{VIEWER_TOKEN}",
]


@pytest.mark.parametrize("header", ACCEPTED)
def test_a_bearer_header_gives_its_token(header):
    assert bearer_token(header) == VIEWER_TOKEN


@pytest.mark.parametrize("header", REFUSED)
def test_anything_else_is_refused_saying_whether_the_header_was_missing(header):
    with pytest.raises(BearerError) as refused:
        bearer_token(header)
    assert refused.value.missing is (header is None)


def test_the_api_and_metrics_agree_on_every_spelling(app, database_url):
    with build(database_url) as secured:
        client = secured.test_client()

        def answers(header: str | None) -> tuple[int, int]:
            headers = {} if header is None else {"Authorization": header}
            api = client.get("/api/jobs/stats/", headers=headers).status_code
            return api, client.get("/metrics", headers=headers).status_code

        assert [answers(h) for h in ACCEPTED] == [(200, 200)] * len(ACCEPTED)
        assert [answers(h) for h in REFUSED] == [(401, 401)] * len(REFUSED)
