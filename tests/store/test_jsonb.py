"""psycopg's jsonb loader: values too deep for Python's parser become a stand-in, not an error."""

from __future__ import annotations

import json

from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.jsonb import UnreadableJson, loads


def test_ordinary_values_decode_as_json_does():
    for raw in (b'{"a": [1, 2.5, null, "x"]}', b"[]", b'"text"', b"3"):
        assert loads(raw) == json.loads(raw)
        assert not isinstance(loads(raw), UnreadableJson)


def test_too_deep_a_value_becomes_a_stand_in_that_still_serialises():
    deep = b"[" * 5000 + b"]" * 5000
    value = loads(deep)
    assert isinstance(value, UnreadableJson)
    assert value == "(JSON value nested too deeply to decode here: 10,000 bytes)"
    assert json.loads(json.dumps(value)) == value


def test_the_app_reads_jsonb_through_it(app):
    with db.engine.connect() as conn:
        shallow = conn.execute(text("SELECT CAST('{\"a\": [1]}' AS jsonb)")).scalar_one()
        deep = conn.execute(text("SELECT CAST(repeat('[', 3000) || repeat(']', 3000) AS jsonb)")).scalar_one()
    assert shallow == {"a": [1]}
    assert isinstance(deep, UnreadableJson)
