"""The diagnose engine reading a file line by line finds what it finds reading it whole.

``ctx doctor`` diagnoses a session from its bytes (:func:`ctxcli.sessions.diagnose`):
each line is parsed once, seen by every rule whole, then kept thin. ``ctx sessions``
(and ``ctx validate``) diagnose a file already read whole
(:func:`~ctxcli.sessions.doctor.diagnose_file`). The two must name the same problems,
in the same order, with the same messages. ``ctx doctor --fix`` holds a Claude Code
session's records thin too; its output must be what it was when it held them whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.bench.gen_transcript import repeated_session
from test_doctor import CASES, _base

from ctxcli.formats.clients import ClientFile, read_client_file
from ctxcli.formats.diagnose import Limits, Problem, Rule, diagnose_input
from ctxcli.formats.lines import Record
from ctxcli.sessions import diagnose, doctor, plan_fixes
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


# -- the repair: what it made before it read sessions line by line -------------------------

GOLDEN = Path(__file__).parent.parent / "fixtures" / "doctor_fix_d8129b9.json"
"""What :func:`plan_fixes` made of each crafted case and shared session at d8129b9, when
it held every record parsed (digests of the output, the restore script and what went to
the sink; the notes and problems as they were)."""


class _Sink:
    """A sink that names what it is given by digest (no store, no paths)."""

    def __init__(self) -> None:
        self.log: list[Any] = []

    def put(self, area: str, key: str, text: str) -> str:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        self.log.append(["put", area, key, digest])
        return f"<{area}/{key}>"

    def add_original(self, raw: bytes | memoryview, texts: Iterable[str] = ()) -> list[Any]:
        digest = hashlib.sha256(bytes(raw)).hexdigest()
        self.log.append(["orig", digest, [len(t) for t in texts]])
        return ["o", digest]


def _repair_digest(raw: bytes, limit: int) -> dict[str, Any]:
    sink = _Sink()
    r = plan_fixes(raw, sink, max_line_bytes=limit)
    return {
        "output": hashlib.sha256(r.output).hexdigest(),
        "bytes": len(r.output),
        "script": hashlib.sha256(orjson.dumps(r.script)).hexdigest(),
        "sink": hashlib.sha256(orjson.dumps(sink.log)).hexdigest(),
        "changed": r.changed_lines,
        "notes": r.notes,
        "fixed": [[p.line, p.kind, p.message] for p in r.fixed],
        "remaining": [[p.line, p.kind, p.message] for p in r.remaining],
    }


def _golden() -> dict[str, Any]:
    golden: dict[str, Any] = orjson.loads(GOLDEN.read_bytes())
    return golden


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_crafted_repair_is_what_the_whole_records_repair_made(case: str) -> None:
    assert _repair_digest(CASES[case](_base()), 20_000) == _golden()[f"case:{case}"]


@pytest.mark.real_data
def test_every_shared_session_is_repaired_as_the_whole_records_repair_did() -> None:
    shared = need_shared()
    golden = _golden()
    names = [k.split(":")[1] for k in golden if k.startswith("shared:") and k.count(":") == 2]
    assert names
    for key in golden:
        if not key.startswith("shared:") or key.count(":") != 2:
            continue
        _kind, name, limit = key.split(":")
        raw = (shared / name).read_bytes()
        assert _repair_digest(raw, int(limit)) == golden[key], key


@pytest.mark.real_data
def test_the_repeated_session_is_repaired_as_the_whole_records_repair_did() -> None:
    # The bench's session, smaller: every copy has a payload stored twice (155 repairs).
    raw = repeated_session((need_shared() / "cc_spotter_4d5611e5.jsonl").read_bytes(), 8 << 20)
    key = "shared:cc_spotter_4d5611e5.jsonl:repeated-8MiB:1000000"
    assert _repair_digest(raw, 1_000_000) == _golden()[key]


def test_the_repair_holds_only_thin_records_and_packed_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Once each line was read whole for its contents, the records the repair follows
    # links through hold ids and links only; a changed one its edited line, compressed.
    raw = CASES["duplicate_tool_use_result"](_base())
    held: list[Any] = []
    relink = doctor._relink

    def spy(recs: list[Any]) -> None:
        held.extend(recs)
        relink(recs)

    monkeypatch.setattr(doctor, "_relink", spy)
    repair = plan_fixes(raw, _Sink(), max_line_bytes=1_000_000)
    assert repair.changed_lines == 1 and held
    changed = [r for r in held if r.changed]
    assert len(changed) == 1 and changed[0].packed is not None
    assert all(r.thin for r in held if not r.changed and r.data is not None)
    assert not any("toolUseResult" in r.data or r.data.get("message") for r in held if r.data)
