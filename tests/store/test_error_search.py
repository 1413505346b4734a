"""Error-text search: any job, by the words and fragments an operator copies out of an error
(host names, dotted names, paths and their parts), through the partial GIN index."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import event, func, select, text

from dashboard.extensions import db
from dashboard.store.reads import error_search, search
from dashboard.store.reads import lists as find_jobs
from dashboard.store.values import utcnow
from tests.support.factories import insert_series, make_job

ERRORS = {
    "smtp": "SMTPError: connection to smtp.example.com:25 refused (after 3 tries)",
    "partner": "HTTPError: 503 Service Unavailable from https://api.partner.io/v2/orders",
    "billing": "KeyError: 'total' in billing.invoice.render",
    "path": "FileNotFoundError: [Errno 2] No such file: '/var/data/exports/2026-06.csv'",
    "cafe": "ValueError: café_au_lait not in menu",
}


SECONDS_AGO = "now() - g * interval '1 second'"  # job g of a series: g seconds old


@pytest.fixture(params=["newest first", "through the GIN"])
def jobs(app, request, monkeypatch):
    """The same errors, searched both ways: read newest first (every error read, so the walk
    answers) and, with the walk refused, through job_error_fts_idx."""
    if request.param == "through the GIN":
        monkeypatch.setattr(error_search, "newest", lambda *args, **kwargs: None)
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


def test_the_walk_reads_the_newest_errors_in_order_through_their_index(app, monkeypatch):
    """On an analysed table of 20,000 jobs, 2,000 with an error, more than a walk's bound
    (as a large table's errors are), the walk reads job_error_created_idx in order (no sort,
    no GIN), whatever the word."""
    monkeypatch.setattr(error_search, "WALK_ROWS", 500)
    terms = search.parse_q("smtp.example.com")
    captured: list[str] = []
    with db.engine.connect() as conn, conn.begin() as transaction:
        insert_series(conn, 18_000, at=SECONDS_AGO)
        error = "'SMTPError ' || g || ' at smtp.example.com'"
        insert_series(conn, 2_000, failed=True, error=error, at=SECONDS_AGO)
        conn.execute(text("ANALYZE jobs_job"))

        @event.listens_for(conn, "before_cursor_execute", retval=True)
        def explain(conn_, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
            if "recent" in statement and not captured:
                cursor.execute("EXPLAIN " + statement, parameters)
                captured.append("\n".join(row[0] for row in cursor.fetchall()))
            return statement, parameters

        walked = error_search.newest(conn, terms, [], depth=50, limit=50, before=None, after=None)
        transaction.rollback()
    assert walked is not None and len(walked.keys) == 50
    plan = captured[0]
    assert "Index Scan using job_error_created_idx" in plan, plan
    assert "Sort" not in plan and "job_error_fts_idx" not in plan, plan


def test_a_word_in_more_errors_than_the_cap_counts_at_least_the_cap(app, monkeypatch):
    """Through the GIN, past ``ARM_CAP`` matches the search keeps the cap's worth and says its
    count is a lower bound (the page says "at least"), not that it is the total."""
    monkeypatch.setattr(error_search, "newest", lambda *args, **kwargs: None)
    over = find_jobs.ARM_CAP + 500
    with db.engine.begin() as conn:
        insert_series(conn, over, failed=True, error="'TimeoutError: call ' || g")
    page = find_jobs.search_jobs(search.parse_q("TimeoutError"), limit=3, offset=0)
    assert page.count == find_jobs.ARM_CAP and not page.count_exact
    assert len(page.results) == 3 and all(job.last_error.startswith("TimeoutError") for job in page.results)
    fewer = find_jobs.search_jobs(search.parse_q("call 7"), limit=3, offset=0)
    assert fewer.count_exact and fewer.count == len({n for n in range(1, over + 1) if str(n).startswith("7")})


def newest_matches(q: str, status: str | None = None) -> list[str]:
    """Every match of ``q``, newest first, as the GIN tells them (the truth to compare with)."""
    with db.engine.connect() as conn:
        terms = search.parse_q(q)
        where = find_jobs.filters(status, None)
        found = error_search.indexed(terms, where, 1_000_000).subquery()
        order = (found.c.created_at.desc(), found.c.id.desc())
        return [str(row.id) for row in conn.execute(select(found.c.id).order_by(*order))]


def test_a_common_word_pages_its_newest_matches_and_counts_at_least_so_many(app):
    """A word in most errors: the page is its newest matches (by key too, older and newer), the
    count ``COUNTED`` and a lower bound; each page needs no GIN lookup."""
    total = error_search.COUNTED + 300
    with db.engine.begin() as conn:
        insert_series(conn, total, failed=True, error="'TimeoutError: call ' || g", at=SECONDS_AGO)
        insert_series(conn, 50, at=SECONDS_AGO)  # queued, no error: not walked
    truth = newest_matches("TimeoutError")
    assert len(truth) == total
    first = find_jobs.search_jobs(search.parse_q("TimeoutError"), limit=20, offset=0)
    assert [str(job.id) for job in first.results] == truth[:20]
    assert first.count == error_search.COUNTED and not first.count_exact
    deep = find_jobs.search_jobs(search.parse_q("TimeoutError"), limit=20, offset=1_100)
    assert [str(job.id) for job in deep.results] == truth[1_100:1_120]
    assert deep.count == 1_121 and not deep.count_exact  # one past the page: the API links a next one
    last = first.results[-1]
    older = find_jobs.search_jobs(
        search.parse_q("TimeoutError"), limit=20, offset=0, before=(last.created_at, last.id)
    )
    assert [str(job.id) for job in older.results] == truth[20:40]
    assert older.count >= error_search.COUNTED and not older.count_exact
    key = older.results[0]
    newer = find_jobs.search_jobs(
        search.parse_q("TimeoutError"), limit=20, offset=0, after=(key.created_at, key.id)
    )
    assert [str(job.id) for job in newer.results] == truth[:20]


def test_a_word_rare_among_the_newest_errors_is_found_through_the_gin(app, monkeypatch):
    """Fewer matches than a page among the newest ``WALK_ROWS`` errors: the walk stops at its
    bound and the GIN finds the old ones, counted exactly."""
    monkeypatch.setattr(error_search, "WALK_ROWS", 200)
    with db.engine.begin() as conn:
        insert_series(
            conn,
            3,
            failed=True,
            error="'OldError ' || g",
            at="now() - interval '1 day' - g * interval '1 second'",
        )
        insert_series(conn, 250, failed=True, error="'NewError ' || g", at=SECONDS_AGO)
    walked = []
    real = error_search.newest
    monkeypatch.setattr(error_search, "newest", lambda *a, **k: walked.append(real(*a, **k)) or walked[-1])
    page = find_jobs.search_jobs(search.parse_q("OldError"), limit=20, offset=0)
    assert walked == [None]
    assert [str(job.id) for job in page.results] == newest_matches("OldError")
    assert page.count == 3 and page.count_exact


def test_the_walk_tests_the_filters_on_the_rows_it_reads(app):
    """A status filter inside the walk's bound: the failed matches among errors of every status,
    and an error in no failed job is no match."""
    with db.engine.begin() as conn:
        insert_series(conn, 30, failed=True, error="'SMTPError ' || g", at=SECONDS_AGO)
        insert_series(
            conn,
            30,
            error="'SMTPError retry ' || g",
            at="now() - g * interval '1 second' + interval '1 hour'",
        )
    failed = find_jobs.search_jobs(search.parse_q("SMTPError"), limit=10, offset=0, status="failed")
    assert [str(job.id) for job in failed.results] == newest_matches("SMTPError", status="failed")[:10]
    assert failed.count == 30 and failed.count_exact
    retries = find_jobs.search_jobs(search.parse_q("retry"), limit=10, offset=0, status="failed")
    assert retries.results == [] and retries.count == 0 and retries.count_exact
