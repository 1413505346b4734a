"""The CTEs the statements share are pinned to their few known bodies.

Statements stay whole (each reads top to bottom), so a CTE such as ``picked``, ``done``,
``freed`` or ``served`` is written out in every statement that uses it. A change to the rule it
holds must reach every copy: this test fails when a copy's body is one the pins do not know,
naming the CTE and the statements that carry each of its bodies, so a change made to nine of
ten copies cannot pass unnoticed. A deliberate change updates the pins: the failure prints the
new table (or run ``python -m tests.store.test_cte_pins``).

A body is compared with its whitespace collapsed; a CTE that only one statement has is not
pinned (nothing can drift from it).
"""

from __future__ import annotations

import hashlib
import pprint
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace

from dashboard.store.sql import STATEMENTS, Statement

CTE = re.compile(
    r"(?:\bWITH\s+(?:RECURSIVE\s+)?|,\s*)([a-z_][a-z0-9_]*)\s+AS\s+(?:NOT\s+)?(?:MATERIALIZED\s+)?\(", re.I
)


def ctes(sql: str) -> Iterator[tuple[str, str]]:
    """``(name, body)`` of every CTE of a statement, nested ones included."""
    for found in CTE.finditer(sql):
        depth, end = 1, found.end()
        while depth and end < len(sql):
            depth += {"(": 1, ")": -1}.get(sql[end], 0)
            end += 1
        yield found.group(1), " ".join(sql[found.end() : end - 1].split())


def fingerprint(body: str) -> str:
    return hashlib.sha1(body.encode()).hexdigest()[:12]


def bodies(statements: Mapping[str, Statement] = STATEMENTS) -> dict[str, dict[str, list[str]]]:
    """CTE name -> body fingerprint -> the statements that carry that body (shared CTEs only)."""
    found: dict[str, dict[str, list[str]]] = {}
    for name in sorted(statements):
        for cte, body in ctes(statements[name].sql):
            found.setdefault(cte, {}).setdefault(fingerprint(body), []).append(name)
    return {cte: by_body for cte, by_body in found.items() if sum(map(len, by_body.values())) > 1}


def pins() -> dict[str, set[str]]:
    """What :data:`PINNED` should say now: each shared CTE's known bodies."""
    return {cte: set(by_body) for cte, by_body in sorted(bodies().items())}


def test_the_shared_ctes_are_found():
    assert {"picked", "claimed", "done", "freed", "served"} <= set(bodies())


def drift(now: dict[str, dict[str, list[str]]]) -> list[str]:
    """One line per shared CTE whose bodies are not the pinned ones, naming their statements."""
    problems = []
    for cte in sorted(set(now) | set(PINNED)):
        known, seen = PINNED.get(cte, set()), now.get(cte, {})
        if set(seen) == known:
            continue
        carriers = "; ".join(f"{fp} in {', '.join(names)}" for fp, names in sorted(seen.items()))
        problems.append(f"CTE {cte!r}: bodies {carriers or 'none'}; pinned: {sorted(known)}")
    return problems


def test_a_change_to_one_copy_of_many_fails_naming_the_cte():
    name = next(n for n in sorted(STATEMENTS) if "served AS (" in STATEMENTS[n].sql)
    statement = STATEMENTS[name]
    changed = {
        **STATEMENTS,
        name: replace(
            statement, sql=statement.sql.replace("served AS (", "served AS (SELECT 1) , x AS (", 1)
        ),
    }
    [problem] = [line for line in drift(bodies(changed)) if line.startswith("CTE 'served'")]
    assert name in problem


def test_every_copy_of_a_shared_cte_has_a_pinned_body():
    problems = drift(bodies())
    assert not problems, (
        "\n".join(problems)
        + "\n\nIf every copy changed on purpose, PINNED is now:\n"
        + (pprint.pformat(pins(), width=110))
    )


# Each shared CTE's known bodies (fingerprints of the whitespace-collapsed body); see the module's
# docstring for how to change them.
PINNED: dict[str, set[str]] = {
    "audit": {"351adbd944d8", "f981951fbca9", "2cedbc803157", "46bcd0570d14", "bc4e7fc8d3cc"},
    "changed": {
        "04be3e6d36a5",
        "329b9354cbce",
        "11d33dd3f097",
        "b22577e139e1",
        "6ee143bbf0e2",
        "c5ff52987db7",
        "c3ea99bf9662",
        "c6e3024ea010",
        "dcf0836f3a18",
    },
    "claimed": {"0edde931a32d", "39733ec64e9b", "491b87d3b9f8"},
    "counts_apart": {"4208f8a44c98", "49a6584b5732"},
    "done": {"4aa45d10cae8", "a05c9fbe0f6a", "c7d58c1674b7", "fbbe502d696e"},
    "dropped": {"e5610eccf42f", "e73318ee024f"},
    "ensured": {"e8afa35173e1", "567b6f55e1e8"},
    "ev": {
        "05b652544cc2",
        "0c2d66bebfb6",
        "1b63f128d68a",
        "2100352001a9",
        "2d0afdcd315b",
        "50a5fca56291",
        "50bb9dad2bed",
        "650b3f528304",
        "71cfaea4bef7",
        "783b85b8e07f",
        "9499fb860f81",
        "a50eab997494",
        "b9efa0babca3",
        "c5403be4ea70",
        "e1b5fbe0c7bd",
        "e6a4bf39a1e0",
        "ea2c85e3777d",
        "f981822aa9e4",
        "fd86584c4e26",
    },
    "failed": {"909d02a49f52"},
    "freed": {"c1155857a5ff", "d370dd19cf00", "dd8de699ed59", "18b4538b2be1", "689272ea96a8"},
    "gate": {"7034a0a02deb"},
    "input": {"a72235ec85f2", "dd81f7b76401", "679125aba3fb"},
    "ins": {"b36f5af13735", "ca206d7dbac1", "ebf1c09ec01c"},
    "mine": {"c7b8c887c720", "1d3571719709"},
    "named": {"642188a6ae89", "4658a945db9e"},
    "next": {"6ec355f2cd94", "78ce872ff0a1"},
    "parents": {"0f0d6a35bab3", "879cf990ac8f"},
    "picked": {
        "0b6fccda28b9",
        "49293559bb38",
        "50f0d2e43f4b",
        "79be44c478c7",
        "b9115c0003e8",
        "c79770867711",
        "cb7db2f56f57",
    },
    "served": {"4c18dae04891", "8ce309174559"},
    "settled_and_claimed": {"b5c64c897388", "1fbf37033115"},
    "took_rate": {"758456975c3e", "6c9ea096ab7b"},
    "took_slot": {"3bbeee700e83", "444ab5253901"},
    "wake": {"c77941dc351c", "d8bd9322cf69", "9f69b50a1b40", "4e0fb9bfacb8", "406be6b4b564"},
}


if __name__ == "__main__":
    pprint.pprint(pins(), width=110)
