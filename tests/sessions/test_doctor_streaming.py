"""The diagnose engine reading a file line by line finds what it finds reading it whole.

``ctx doctor`` diagnoses a session from its bytes (:func:`ctxcli.sessions.diagnose`):
each line is parsed once, seen by every rule whole, then kept thin. ``ctx sessions``
(and ``ctx validate``) diagnose a file already read whole
(:func:`~ctxcli.sessions.doctor.diagnose_file`). The two must name the same problems,
in the same order, with the same messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_doctor import CASES, _base

from ctxcli.formats.clients import ClientFile, read_client_file
from ctxcli.formats.diagnose import Limits, Problem, Rule, diagnose_input
from ctxcli.formats.lines import Record
from ctxcli.sessions import diagnose
from ctxcli.sessions.client_rules import rules_for
from ctxcli.sessions.doctor import diagnose_file
from support.paths import need_shared


def _both(raw: bytes, limit: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    streamed = diagnose(raw, "s.jsonl", max_line_bytes=limit).to_dict()
    whole = diagnose_file(read_client_file(raw, "s.jsonl"), max_line_bytes=limit).to_dict()
    return streamed, whole


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_crafted_problem_is_found_alike_streamed_and_whole(case: str) -> None:
    streamed, whole = _both(CASES[case](_base()), 20_000)
    assert streamed == whole
    assert case.split("/")[0] in {p["kind"] for p in streamed["problems"]}


@pytest.mark.real_data
def test_every_shared_session_is_diagnosed_alike_streamed_and_whole() -> None:
    shared = need_shared()
    paths = sorted(shared.glob("*.jsonl"))
    assert paths
    for path in paths:
        raw = path.read_bytes()
        for limit in (1_000_000, 20_000):
            streamed, whole = _both(raw, limit)
            assert streamed == whole, path.name


def test_the_rules_judge_a_session_from_thin_records() -> None:
    # Every record the rules judge from holds ids, links and types, never its content:
    # the parsed records of a large session are not held while it is diagnosed.
    raw = CASES["repeated_attachment"](_base())
    judged: list[Record] = []

    class Spy:
        def see(self, rec: Record) -> None:
            pass

        def problems(self, file: ClientFile) -> list[Problem]:
            judged.extend(file.records)
            return []

    def rules(file: ClientFile) -> tuple[Rule, ...]:
        return (*rules_for(file), Rule("spy", "", lambda _limits: Spy()))

    found = diagnose_input(raw, "s.jsonl", rules, Limits())
    assert "repeated_attachment" in {p.kind for p in found.problems}
    assert judged and all(isinstance(r.data, dict) for r in judged if r.data is not None)
    held = [r.data for r in judged if r.data is not None]
    assert not any(d.get("message") for d in held)  # the mark of a message, not its content
    assert not any("toolUseResult" in d for d in held)
    assert all(m.text == "" for m in (r.message for r in judged) if m is not None)
    whole = read_client_file(raw, "s.jsonl")
    assert any(r.data.get("message") for r in whole.records if isinstance(r.data, dict))


def test_a_file_of_blanks_is_diagnosed_alike(tmp_path: Path) -> None:
    assert _both(b"\n \n", 1_000_000)[0] == _both(b"\n \n", 1_000_000)[1]
