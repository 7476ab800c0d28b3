"""The recall floor: no ctx stage or preset may lose more referenced terms than it did.

tests/recall_floor.json holds, for every ctx method of ``make eval`` (benchmarks/eval.py)
and every real transcript in ../shared/transcripts, the share of referenced terms it
kept (in points) when issue 21 closed. A method that now keeps less than that, by more
than TOLERANCE points, fails here. After a deliberate change, rerun
``python benchmarks/eval.py --write-floor tests/recall_floor.json`` and say why in the commit.
"""

from __future__ import annotations

import json

import pytest
from support.bench.eval import evaluate, floor_of

from support.paths import SHARED, TESTS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.real_data,
]

FLOOR = TESTS / "recall_floor.json"
TOLERANCE = 0.5  # points


@pytest.fixture(scope="module")
def now() -> dict[str, dict[str, float]]:
    """Every ctx method's recall per file, measured now (about 6 s)."""
    return floor_of(evaluate(SHARED, [], peers=False))


def test_no_method_falls_below_its_recorded_recall(now: dict[str, dict[str, float]]) -> None:
    floor = json.loads(FLOOR.read_text())
    below = [
        f"{method} on {name}: {now.get(method, {}).get(name, 'not measured')} < {points}"
        for method, files in floor.items()
        for name, points in files.items()
        if not isinstance(now.get(method, {}).get(name), float)
        or now[method][name] < points - TOLERANCE
    ]
    assert not below, "recall fell below tests/recall_floor.json:\n" + "\n".join(below)


def test_the_floor_covers_every_method_and_file(now: dict[str, dict[str, float]]) -> None:
    floor = json.loads(FLOOR.read_text())
    assert {m: sorted(f) for m, f in now.items()} == {m: sorted(f) for m, f in floor.items()}
