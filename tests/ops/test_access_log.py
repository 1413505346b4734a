"""The web process's access log (dashboard/ops/access_log.py): gunicorn's lines, built cheaper."""

from __future__ import annotations

import base64
import logging
from datetime import timedelta
from types import SimpleNamespace

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

from dashboard.ops.access_log import AccessLog

DEFAULT = Config().access_log_format


def _lines(logger_class: type[Logger], access_log_format: str) -> list[str]:
    cfg = Config()
    cfg.set("accesslog", "-")
    cfg.set("access_log_format", access_log_format)
    logger = logger_class(cfg)
    logger.now = lambda: "[01/Dec/2026:03:00:00 +0000]"  # one clock for both loggers
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger.access_log.handlers = [Keep()]
    basic = base64.b64encode(b"ops:hunter2").decode()
    for auth in (None, f"Basic {basic}", "Bearer secret-token"):
        environ = {
            "REMOTE_ADDR": "10.0.0.7",
            "REQUEST_METHOD": "POST",
            "RAW_URI": '/api/jobs/?q="x"',
            "SERVER_PROTOCOL": "HTTP/1.1",
            "PATH_INFO": "/api/jobs/",
            "QUERY_STRING": 'q="x"',
            "HTTP_USER_AGENT": 'curl/8 "quoted"',
            "HTTP_REFERER": 'https://ops.example/jobs/?q="x"',
            "HTTP_X_REQUEST_ID": "req-1",
            "wsgi.input": object(),
        }
        if auth:
            environ["HTTP_AUTHORIZATION"] = auth
        req = SimpleNamespace(headers=[("X-REQUEST-ID", "req-1"), ("USER-AGENT", "curl/8")])
        resp = SimpleNamespace(status="201 Created", sent=482, headers=[("Content-Type", "application/json")])
        logger.access(resp, req, environ, timedelta(microseconds=1234))
    return records


@pytest.mark.parametrize(
    "access_log_format",
    [
        DEFAULT,
        "%(h)s %(l)s %(u)s %(r)s %(m)s %(U)s %(q)s %(H)s %(s)s %(b)s %(B)s %(f)s %(a)s %(T)s %(D)s %(M)s "
        "%(L)s %(p)s %(x)s",
        '%(h)s "%(r)s" %(s)s %({x-request-id}i)s %({content-type}o)s %({remote_addr}e)s',
    ],
    ids=["default", "every plain atom", "header and environ atoms"],
)
def test_lines_are_gunicorns_own(access_log_format):
    ours = _lines(AccessLog, access_log_format)
    assert ours == _lines(Logger, access_log_format)
    assert len(ours) == 3 and all("10.0.0.7" in line for line in ours)


def test_the_default_line_names_the_basic_user_and_no_secret():
    lines = _lines(AccessLog, DEFAULT)
    request_line = '"POST /api/jobs/?q=\\"x\\" HTTP/1.1" 201 482'
    assert lines[0].startswith(f"10.0.0.7 - - [01/Dec/2026:03:00:00 +0000] {request_line}")
    assert lines[1].startswith("10.0.0.7 - ops ")
    assert not any("hunter2" in line or "secret-token" in line for line in lines)


def test_a_format_naming_an_environ_atom_reads_the_environ():
    assert _lines(AccessLog, "%({remote_addr}e)s %({x-request-id}i)s") == ["10.0.0.7 req-1"] * 3


def test_the_web_process_uses_it():
    from gunicorn.util import load_class

    from .test_gunicorn_conf import load_conf

    assert load_class(load_conf().logger_class) is AccessLog
