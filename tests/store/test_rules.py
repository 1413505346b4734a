"""``limits.json_problem``: its fast check without paths agrees with the walk that names them."""

from __future__ import annotations

import math
from typing import Any

import pytest

from dashboard.config.rules import MAX_JSON_DEPTH, JsonProblem, _first_problem, _storable, json_problem


class Flag(int):
    """An int subclass, as bool is."""


class Text(str):
    pass


class Number(float):
    pass


def nested(depth: int, leaf: Any = 1) -> Any:
    doc = leaf
    for _ in range(depth - 1):
        doc = {"a": doc}
    return doc


def listed(depth: int, leaf: Any = 1) -> Any:
    doc = leaf
    for _ in range(depth - 1):
        doc = [doc]
    return doc


DOCUMENTS = [
    {},
    [],
    {"i": 1},
    "plain",
    "é and ü\u2028",
    3.5,
    None,
    True,
    {"a": [1, 2.5, "three", None, {"b": []}]},
    nested(MAX_JSON_DEPTH),
    nested(MAX_JSON_DEPTH + 1),
    nested(MAX_JSON_DEPTH - 1, {}),
    nested(MAX_JSON_DEPTH, {}),
    listed(MAX_JSON_DEPTH),
    listed(MAX_JSON_DEPTH + 1),
    listed(MAX_JSON_DEPTH, []),
    nested(MAX_JSON_DEPTH + 1, {}),
    listed(MAX_JSON_DEPTH + 1, []),
    nested(MAX_JSON_DEPTH - 1, [1]),
    nested(MAX_JSON_DEPTH, [1]),
    {"f": Flag(1), "t": Text("ok"), "x": Number(1.5)},
    [Text("bad\x00"), Number(2.0)],
    [Number(math.inf)],
    {Text("k\x00"): 1},
    {"ok": 1, "bad\x00key": 2},
    {"a": ["ok", {"b": "x\x00"}]},
    {"a": "\ud800"},
    {"\udfff": 1},
    ["é", "\ud83d"],
    {"n": math.inf},
    [1.0, -math.inf],
    {"n": math.nan},
    "\x00",
    {"a": [{"b": 1}, {"c": "\x00"}], "d": "\ud800"},
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_fast_check_and_the_named_walk_agree(document):
    assert _storable(document) == (_first_problem(document) is None)
    assert json_problem(document) == _first_problem(document)


def test_a_problem_is_named_by_its_path():
    assert json_problem({"a": [{"b": 1}, {"c": "x\x00"}]}) == JsonProblem("nul", "a[1].c")
    assert json_problem({"ok": {"bad\x00": 1}}) == JsonProblem("nul", "ok", key="bad\x00")
    assert json_problem(nested(MAX_JSON_DEPTH + 1)).kind == "depth"
    assert json_problem({"n": [math.inf]}) == JsonProblem("number", "n[0]")
