"""Error-text search: any job, by the words and fragments an operator copies out of an error
(host names, dotted names, paths and their parts), through the partial GIN index."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, text

from dashboard.extensions import db
from dashboard.store import find_jobs, search
from dashboard.store.values import utcnow
from tests.support.factories import insert_series, make_job

ERRORS = {
    "smtp": "SMTPError: connection to smtp.example.com:25 refused (after 3 tries)",
    "partner": "HTTPError: 503 Service Unavailable from https://api.partner.io/v2/orders",
    "billing": "KeyError: 'total' in billing.invoice.render",
    "path": "FileNotFoundError: [Errno 2] No such file: '/var/data/exports/2026-06.csv'",
    "cafe": "ValueError: café_au_lait not in menu",
}


@pytest.fixture
def jobs(app):
    now = utcnow()
    made = {
        "smtp": make_job("failed", last_error=ERRORS["smtp"], finished_at=now),
        # backing off after a failed attempt: queued, attempts > 0, its error kept
        "partner": make_job(
            "queued", attempts=1, last_error=ERRORS["partner"], available_at=now + timedelta(60)
        ),
        "billing": make_job("failed", last_error=ERRORS["billing"], finished_at=now),
        "path": make_job("queued", attempts=2, last_error=ERRORS["path"]),
        "cafe": make_job("failed", last_error=ERRORS["cafe"], finished_at=now),
    }
    make_job("queued")
    make_job("succeeded")
    make_job("running")
    return {name: str(job.id) for name, job in made.items()}


def found(q: str, **filters: str) -> set[str]:
    page = find_jobs.search_jobs(search.parse_q(q), limit=100, offset=0, **filters)
    return {str(job.id) for job in page.results}


@pytest.mark.parametrize(
    ("q", "names"),
    [
        ("smtp.example.com", {"smtp"}),
        ("example", {"smtp"}),
        ("smtp.example.com:25", {"smtp"}),
        ("example.com refused", {"smtp"}),
        ("connection refused", {"smtp"}),
        ("SMTPError", {"smtp"}),
        ("api.partner.io", {"partner"}),
        ("partner", {"partner"}),
        ("https://api.partner.io/v2", {"partner"}),
        ("billing.invoice", {"billing"}),
        ("billing.inv", {"billing"}),
        ("invoice.render", {"billing"}),
        ("/var/data", {"path"}),
        ("var/data/exp", {"path"}),
        ("2026-06.csv", {"path"}),
        ("café", {"cafe"}),
        ("au_lait", {"cafe"}),
        ("Errno 2", {"path"}),
        ("error", set()),  # the start of no part: "SMTPError" is one part, and no infix is indexed
    ],
)
def test_an_error_is_found_by_what_an_operator_copies_out_of_it(jobs, q, names):
    assert found(q) == {jobs[name] for name in names}


@pytest.mark.parametrize("q", ["example.org", "com.example", "data/var", "smtp.example.com:26", "xample"])
def test_parts_must_be_in_order_and_whole_but_the_last(jobs, q):
    assert found(q) == set()


def test_every_status_is_searched_and_the_status_filter_still_applies(jobs):
    assert found("partner") == {jobs["partner"]}
    assert found("partner", status="queued") == {jobs["partner"]}
    assert found("partner", status="failed") == set()
    assert found("smtp", status="failed") == {jobs["smtp"]}


def test_tsquery_syntax_in_a_search_is_just_text(jobs):
    for q in ["smtp & !example", "a:* | b", "'quoted' (paren) <-> x", "\\", "--", "<>!:*"]:
        search.parse_q(q)  # no syntax error from to_tsquery
        found(q)
    assert search.error_query("<->!&|") is None


def test_the_query_is_the_parts_of_each_word_the_last_a_prefix():
    assert search.error_query("refused smtp.example.com") == "(refused:*) & (smtp <-> example <-> com:*)"
    assert search.error_query("/var/data/") == "(var <-> data:*)"
    parts = search.error_parts(" ".join(f"w{i}.x" for i in range(20)))
    assert len(parts) == search.MAX_WORDS and sum(map(len, parts)) <= search.MAX_PIECES


def test_the_excerpt_marks_where_the_search_matched():
    terms = search.parse_q("smtp.example.com")
    excerpt = search.error_excerpt(ERRORS["smtp"], terms, before=15, after=10)
    assert excerpt == search.ErrorExcerpt("... connection to ", "smtp.example.com", ":25 refuse...")
    words = search.error_excerpt(ERRORS["billing"], search.parse_q("render billing.inv"))
    assert words is not None and words.match == "billing.invoice"  # the earliest word in the error
    assert search.error_excerpt(ERRORS["billing"], search.parse_q("nothing")) is None
    assert search.error_excerpt("", terms) is None


def test_the_search_reads_the_partial_gin_index(app):
    """On an analysed table of 20,000 errors, the error arm is a bitmap scan of
    job_error_fts_idx (its expression and predicate match the index's, whatever the plan)."""
    terms = search.parse_q("smtp.example.com")
    ids = find_jobs.matching(terms, [], status=None).subquery()
    query = select(func.count()).select_from(ids)
    compiled = query.compile(db.engine)
    with db.engine.connect() as conn, conn.begin() as transaction:
        insert_series(
            conn,
            20_000,
            failed=True,
            error="'Error ' || g || ' at host' || (g % 500) || '.example.net/path' || g",
        )
        conn.execute(text("ANALYZE jobs_job"))
        plan = "\n".join(row[0] for row in conn.exec_driver_sql(f"EXPLAIN {compiled}", compiled.params))
        transaction.rollback()
    assert "Bitmap Index Scan on job_error_fts_idx" in plan, plan


def test_a_word_in_more_errors_than_the_cap_counts_at_least_the_cap(app):
    """Past ``ARM_CAP`` matches the search keeps the cap's worth and says its count is a lower
    bound (the page says "at least"), not that it is the total."""
    over = find_jobs.ARM_CAP + 500
    with db.engine.begin() as conn:
        insert_series(conn, over, failed=True, error="'TimeoutError: call ' || g")
    page = find_jobs.search_jobs(search.parse_q("TimeoutError"), limit=3, offset=0)
    assert page.count == find_jobs.ARM_CAP and not page.count_exact
    assert len(page.results) == 3 and all(job.last_error.startswith("TimeoutError") for job in page.results)
    fewer = find_jobs.search_jobs(search.parse_q("call 7"), limit=3, offset=0)
    assert fewer.count_exact and fewer.count == len({n for n in range(1, over + 1) if str(n).startswith("7")})
