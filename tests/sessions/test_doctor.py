"""ctx doctor: every diagnosis, every repair, and restore giving the damaged original back."""

from __future__ import annotations

import base64
import hashlib
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.bench.gen_transcript import repeated_session

from ctxcli.api import restore_file
from ctxcli.formats.claude_code import resume_chain
from ctxcli.formats.clients import read_client_file
from ctxcli.formats.diagnose import Limits
from ctxcli.formats.validate import validate_bytes
from ctxcli.sessions import diagnose, fix_in_place, plan_fixes
from ctxcli.sessions.client_rules import duplicate_payloads
from ctxcli.store.history import changes_dir
from ctxcli.store.naming import Preview
from support.cli import invoke
from support.paths import SHARED
from support.session_layout import CC_MCLAUDE, Layout, age, build


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    return build(tmp_path / "home", monkeypatch)


def test_the_malformed_mclaude_session_is_repaired_and_restored(layout: Layout) -> None:
    damaged = layout.mclaude.read_bytes()
    assert damaged == (SHARED / "cc_mclaude_c76e5be5.jsonl").read_bytes()
    result = invoke(["doctor", "--session", "c76e", "--json"], code=1)
    kinds = {p["kind"] for p in orjson.loads(result.stdout)["files"][0]["problems"]}
    assert {"malformed_line", "chain_starts_with_assistant", "unanswered_call"} <= kinds
    # Before: the chain a resume rebuilds starts at an assistant turn.
    datas: list[Any] = []
    for line in damaged.splitlines():
        try:
            datas.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            datas.append(None)
    assert datas[resume_chain(datas)[0]]["type"] == "assistant"

    fix = orjson.loads(invoke(["doctor", "--session", "c76e", "--fix", "--json"]).stdout)
    entry = fix["files"][0]
    assert entry["valid"] is True and fix["failed"] == 0
    assert {p["kind"] for p in entry["fixed"]} == kinds
    layer = changes_dir(layout.mclaude) / "0001-doctor"
    assert entry["offload_dir"] == str(layer)

    repaired = layout.mclaude.read_bytes()
    datas = [orjson.loads(line) for line in repaired.splitlines()]
    chain = resume_chain(datas)
    first = next(datas[k] for k in chain if datas[k].get("type") in ("user", "assistant"))
    assert first["type"] == "user"
    assert validate_bytes(repaired) == []  # every tool_use answered, every result paired
    line_859 = datas[858]
    assert line_859["message"]["content"][0]["content"] == "M\\[REDACTED_EMAIL]"
    invoke(["doctor", str(layout.mclaude)])  # healthy now: exit 0

    assert invoke(["restore", str(layout.mclaude)]).stdout_bytes == damaged
    age(layout.mclaude, 120)
    invoke(["restore", str(layout.mclaude), "--in-place"])
    assert layout.mclaude.read_bytes() == damaged


def test_reduce_points_a_broken_session_to_doctor(layout: Layout) -> None:
    """The bad line is kept (the client skips it too), named, and doctor is pointed to."""
    err = invoke(["reduce", "--session", "c76e", "--in-place"]).stderr
    assert f"{layout.mclaude}:859: not valid JSON" in err
    shown = layout.shown(layout.mclaude)
    assert f"repair such lines with: ctx doctor {shown} --fix" in err
    invoke(["restore", "--session", "c76e", "--in-place", "--force"])
    assert layout.mclaude.read_bytes() == (SHARED / "cc_mclaude_c76e5be5.jsonl").read_bytes()


def test_doctor_all_and_exit_codes(layout: Layout) -> None:
    payload = orjson.loads(invoke(["doctor", "--all", "--json"], code=1).stdout)
    unhealthy = {Path(f["input"]).name for f in payload["files"] if not f["valid"]}
    assert f"{CC_MCLAUDE}.jsonl" in unhealthy
    assert payload["failed"] == len(unhealthy)
    invoke(["doctor", "--session", "01997e76"])
    invoke(["doctor"], code=2)
    invoke(["doctor", "--all", "--session", "c76e"], code=2)
    assert "no such file" in invoke(["doctor", "missing.jsonl"], code=2).stderr


def test_fix_refuses_a_live_session(layout: Layout) -> None:
    age(layout.mclaude, 1)
    err = invoke(["doctor", "--session", "c76e", "--fix"], code=2).stderr
    assert "looks in use" in err
    invoke(["doctor", "--session", "c76e", "--fix", "--force"])


def test_fix_all_skips_a_live_session_and_repairs_the_others(layout: Layout) -> None:
    age(layout.codex, 1)
    payload = orjson.loads(invoke(["doctor", "--all", "--fix", "--json"], code=2).stdout)
    skipped = [f for f in payload["files"] if "skipped" in f]
    assert [Path(f["input"]) for f in skipped] == [layout.codex]
    repaired = next(f for f in payload["files"] if Path(f["input"]) == layout.mclaude)
    assert repaired["valid"] is True and repaired["fixed"]


@pytest.mark.real_data
def test_fix_needs_an_agent_session(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes((SHARED / "oai_taubench_airline_task2_trial1.jsonl").read_bytes())
    invoke(["doctor", str(path)])
    err = invoke(["doctor", str(path), "--fix"], code=2).stderr
    assert "not a Claude Code session or a Codex rollout" in err


# --- one synthetic case per problem ---------------------------------------------------------


def _cc(uuid: str, parent: str | None, role: str, content: Any, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant":
        message = {"id": extra.pop("msg_id", f"msg_{uuid}"), "type": "message", **message}
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "s-1",
        "type": role,
        "message": message,
        "uuid": uuid,
        **extra,
    }


def _call(uuid: str, parent: str, call_id: str) -> dict[str, Any]:
    return _cc(
        uuid,
        parent,
        "assistant",
        [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {}}],
    )


def _result(uuid: str, parent: str, call_id: str, text: str = "ok", **extra: Any) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    return _cc(uuid, parent, "user", [block], **extra)


def _base() -> list[dict[str, Any]]:
    return [
        _cc("u1", None, "user", "do it"),
        _call("a1", "u1", "t1"),
        _result("r1", "a1", "t1"),
        _cc("a2", "r1", "assistant", [{"type": "text", "text": "done"}]),
        _cc("u2", "a2", "user", "thanks"),
        _cc("a3", "u2", "assistant", [{"type": "text", "text": "bye"}]),
    ]


def _lines(records: list[Any]) -> bytes:
    return b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n" for r in records)


BIG = "x" * 5000
PDF = base64.b64encode(bytes(range(256)) * 40).decode()
BIG_PDF = base64.b64encode(bytes(range(256)) * 400).decode()


def _pdf(data: str = PDF) -> dict[str, Any]:
    source = {"type": "base64", "media_type": "application/pdf", "data": data}
    return {"type": "document", "source": source}


CASES: dict[str, Any] = {
    "torn_last_line": lambda r: _lines(r)[:-25],
    "malformed_line": lambda r: _lines(
        [*r[:2], orjson.dumps(r[2]).replace(b'"ok"', b'"o\\k"'), *r[3:]]
    ),
    # Killed mid-write, then resumed: the next record is glued to the torn one.
    "malformed_line/glued": lambda r: _lines(
        [*r[:2], orjson.dumps(r[2])[:40] + orjson.dumps(r[2]), *r[3:]]
    ),
    "dangling_parent": lambda r: _lines([*r[:4], {**r[4], "parentUuid": "gone"}, *r[5:]]),
    "empty_text": lambda r: _lines(
        [*r[:3], _cc("a2", "r1", "assistant", [{"type": "text", "text": ""}]), *r[4:]]
    ),
    "unsigned_thinking": lambda r: _lines(
        [
            *r[:3],
            _cc("a2x", "r1", "assistant", [{"type": "thinking", "thinking": "hm"}]),
            {**r[3], "parentUuid": "a2x"},
            *r[4:],
        ]
    ),
    "unanswered_call": lambda r: _lines(
        [*r[:2], _call("a1b", "a1", "t2"), {**r[2], "parentUuid": "a1b"}, *r[3:]]
    ),
    "orphan_result": lambda r: _lines(
        [*r[:4], _result("rx", "a2", "nope"), {**r[4], "parentUuid": "rx"}, *r[5:]]
    ),
    "duplicate_tool_use_result": lambda r: _lines(
        [
            r[0],
            r[1],
            {**r[2], "toolUseResult": {"stdout": BIG}},
            _call("a1c", "r1", "t3"),
            _result("r3", "a1c", "t3", toolUseResult={"stdout": BIG}),
            {**r[3], "parentUuid": "r3"},
            *r[4:],
        ]
    ),
    "repeated_attachment": lambda r: _lines(
        [
            _cc("u1", None, "user", [_pdf(), {"type": "text", "text": "read this"}]),
            *r[1:4],
            _cc("u2", "a2", "user", [_pdf(), {"type": "text", "text": "again"}]),
            *r[5:],
        ]
    ),
    "unparseable_tool_use_result": lambda r: _lines(
        [*r[:2], {**r[2], "toolUseResult": '{"task": {"output": "cut off'}, *r[3:]]
    ),
    "oversized_line": lambda r: _lines(
        [
            *r[:2],
            _result("r1", "a1", "t1", "y" * 30_000, toolUseResult={"stdout": "y" * 30_000}),
            *r[3:],
        ]
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_problem_is_found_repaired_and_undone(case: str, tmp_path: Path) -> None:
    kind = case.split("/")[0]
    raw = CASES[case](_base())
    problems = diagnose(raw, max_line_bytes=20_000).problems
    assert kind in {p.kind for p in problems}
    store = Preview(str(tmp_path / "off"))
    repair = plan_fixes(raw, store, max_line_bytes=20_000)
    assert kind in {p.kind for p in repair.fixed}
    assert repair.remaining == []
    assert diagnose(repair.output, max_line_bytes=20_000).problems == []
    assert validate_bytes(repair.output) == []
    datas = [orjson.loads(x) for x in repair.output.splitlines()]
    first = next(
        datas[k] for k in resume_chain(datas) if datas[k].get("type") in ("user", "assistant")
    )
    assert first["type"] == "user"


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_repair_restores_byte_for_byte(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = case.split("/")[0]
    monkeypatch.setenv("CTX_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "s.jsonl"
    raw = CASES[case](_base())
    path.write_bytes(raw)
    age(path, 120)
    result = invoke(["doctor", str(path), "--fix", "--max-line-bytes", "20000"])
    assert "repaired; the originals are in" in result.stderr
    if kind == "oversized_line":
        offloaded = list((tmp_path / "data").rglob("doctor/*"))
        assert offloaded and all(str(tmp_path / "data") in line for line in [str(offloaded[0])])
        assert b"the full output is in " + str(tmp_path / "data").encode() in path.read_bytes()
    assert invoke(["restore", str(path)]).stdout_bytes == raw


@pytest.mark.real_data
def test_codex_unanswered_call_gets_what_codex_itself_sends(tmp_path: Path) -> None:
    lines = (SHARED / "codex_agentcmd_2025-09-25T08-02-05.jsonl").read_bytes().splitlines(True)
    at = next(i for i, line in enumerate(lines) if b'"type":"function_call_output"' in line)
    raw = b"".join(lines[:at] + lines[at + 1 :])
    kinds = [p.kind for p in diagnose(raw).problems]
    assert kinds == ["unanswered_call"]
    repair = plan_fixes(raw, Preview(str(tmp_path)))
    added = [orjson.loads(x) for x in repair.output.splitlines()][at]
    assert added["payload"]["output"] == "aborted"
    assert diagnose(repair.output).problems == []


# -- issue 35 §3: a duplicated toolUseResult is a warning ----------------------------------


@pytest.mark.real_data
def test_a_duplicated_payload_is_a_warning_that_fix_removes(tmp_path: Path) -> None:
    # The real spotter session resumes fine; its only finding is payloads stored twice.
    path = tmp_path / "spotter.jsonl"
    path.write_bytes((SHARED / "cc_spotter_4d5611e5.jsonl").read_bytes())
    result = invoke(["doctor", str(path)])
    lines = result.stderr.splitlines()
    assert lines and all(
        "toolUseResult of" in line
        and line.endswith("(a warning: a resume works with it; --fix removes it)")
        for line in lines[:-2]
    ), result.stderr
    assert lines[-2] == f"ctx: {path}: healthy"
    assert lines[-1].startswith("ctx: rules (claude_code): json_lines, tool_pairs, ")
    entry = orjson.loads(invoke(["doctor", str(path), "--json"]).stdout)["files"][0]
    assert entry["valid"] and {p["severity"] for p in entry["problems"]} == {"warning"}
    fixed = invoke(["doctor", str(path), "--fix", "--force", "--json"]).stdout
    assert orjson.loads(fixed)["files"][0]["problems"] == []
    assert "duplicate_tool_use_result" not in {p.kind for p in diagnose(path.read_bytes()).problems}


def test_looking_for_repeated_payloads_keeps_a_digest_of_each_not_the_payload() -> None:
    # 200 distinct 20 KB payloads (4 MB) and one stored again: the rule keeps one key
    # per payload, which was the payload's JSON (a 1 GB session held 0.6x its size).
    records = _base()
    for i in range(200):
        call, parent = f"c{i}", records[-1]["uuid"]
        payload = {"out": f"{i} " + "y" * 20_000}
        records += [
            _call(f"a{call}", parent, call),
            _result(f"r{call}", f"a{call}", call, toolUseResult=payload),
        ]
    records.append(_result("rdup", records[-1]["uuid"], "c199", toolUseResult=payload))
    file = read_client_file(_lines(records))
    tracemalloc.start()
    try:
        found = duplicate_payloads(file, Limits())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    line = len(records) - 1
    assert [(p.line, p.message) for p in found] == [
        (line + 1, f"toolUseResult of 20,014 bytes repeats line {line}")
    ]
    assert peak < 1024 * 1024, f"{peak / 2**20:.1f} MiB held"


# -- issue 43 §2: the resume guarantee ------------------------------------------------------


def test_one_pdf_in_eight_records_shrinks_four_times_and_restores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTX_DATA_DIR", str(tmp_path / "data"))
    pdf = _pdf(BIG_PDF)
    records: list[Any] = [_cc("u0", None, "user", [pdf, {"type": "text", "text": "read"}])]
    parent = "u0"
    for n in range(1, 8):
        # The client stores the attachment again with every record that carries it.
        records.append(_cc(f"a{n}", parent, "assistant", [{"type": "text", "text": f"ok {n}"}]))
        records.append(_cc(f"u{n}", f"a{n}", "user", [pdf, {"type": "text", "text": "more"}]))
        parent = f"u{n}"
    records.append(_cc("a8", parent, "assistant", [{"type": "text", "text": "done"}]))
    raw = _lines(records)
    path = tmp_path / "s.jsonl"
    path.write_bytes(raw)
    found = orjson.loads(invoke(["doctor", str(path), "--json"], code=1).stdout)
    problems = found["files"][0]["problems"]
    assert [p["kind"] for p in problems] == ["repeated_attachment"] * 7
    assert "claude-code#67080" in problems[0]["guards"]
    age(path, 120)
    invoke(["doctor", str(path), "--fix"])
    fixed = path.read_bytes()
    assert len(raw) >= 4 * len(fixed), (len(raw), len(fixed))
    assert fixed.count(BIG_PDF.encode()) == 1  # the first copy stays for the model
    offloaded = list((tmp_path / "data").rglob("doctor/attachment-*"))
    assert len(offloaded) == 1 and offloaded[0].read_text() == BIG_PDF
    store_bytes = sum(f.stat().st_size for f in (tmp_path / "data").rglob("*") if f.is_file())
    assert store_bytes < 2 * len(BIG_PDF)  # one file, and a pack without the copies
    assert diagnose(fixed).problems == []
    assert validate_bytes(fixed) == []
    assert invoke(["restore", str(path)]).stdout_bytes == raw
    invoke(["restore", str(path), "--in-place"])
    assert path.read_bytes() == raw


def test_a_codex_record_over_16_mib_is_found_and_cut(tmp_path: Path) -> None:
    meta = {"type": "session_meta", "payload": {"id": "r-1", "cwd": "/w"}}
    call = {
        "type": "response_item",
        "payload": {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
    }
    out = {
        "type": "response_item",
        "payload": {"type": "function_call_output", "call_id": "c1", "output": "z" * (17 << 20)},
    }
    raw = _lines([meta, call, out])
    kinds = {p.kind for p in diagnose(raw).problems}
    assert {"codex_record_over_16mib", "oversized_line"} <= kinds
    repair = plan_fixes(raw, Preview(str(tmp_path / "off")))
    assert {"codex_record_over_16mib", "oversized_line"} <= {p.kind for p in repair.fixed}
    assert max(len(line) for line in repair.output.splitlines()) < 1_000_000
    assert diagnose(repair.output).problems == []


# -- a saved context size that compacts a Codex resume (openai/codex#24089) ------------------

WINDOW = 258_400  # what Codex records for a 272,000-token model; it compacts from 244,800


def _codex_item(payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-01-01T00:00:00Z", "type": "response_item", "payload": payload}


def _token_count(total: int | None, window: int = WINDOW) -> dict[str, Any]:
    usage = {"input_tokens": 900, "cached_input_tokens": 0, "output_tokens": 100}
    info = None
    if total is not None:
        last = {**usage, "total_tokens": total}
        info = {"total_token_usage": last, "last_token_usage": last, "model_context_window": window}
    return {"type": "event_msg", "payload": {"type": "token_count", "info": info}}


def _rollout(*tail: dict[str, Any], history: str = "hello") -> list[dict[str, Any]]:
    meta = {"type": "session_meta", "payload": {"id": "r-2", "cwd": "/w"}}
    user = _codex_item(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": history}]}
    )
    answer = _codex_item(
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
    )
    return [meta, user, answer, *tail]


def test_an_impossible_saved_context_is_found_fixed_and_undone(tmp_path: Path) -> None:
    raw = _lines(_rollout(_token_count(600_000), _token_count(None)))
    (problem,) = diagnose(raw).problems
    assert (problem.kind, problem.line, problem.fixable) == ("codex_stale_token_count", 4, True)
    assert "600,000 tokens, more than the model's whole window" in problem.message
    assert "244,800" in problem.message and "openai/codex#24089" in str(problem.guards)
    repair = plan_fixes(raw, Preview(str(tmp_path / "off")))
    assert [p.kind for p in repair.fixed] == ["codex_stale_token_count"]
    assert repair.remaining == [] and repair.changed_lines == 1
    before, after = raw.splitlines(), repair.output.splitlines()
    assert [a == b for a, b in zip(before, after, strict=True)] == [True] * 3 + [False, True]
    info, was = (
        orjson.loads(after[3])["payload"]["info"],
        orjson.loads(before[3])["payload"]["info"],
    )
    # Only the figure Codex compacts on: what usage trackers price stays.
    assert 0 < info["last_token_usage"].pop("total_tokens") < 1000
    was["last_token_usage"].pop("total_tokens")
    assert info == was
    assert "saved context size 600,000 ->" in repair.notes[0]


def test_a_stale_saved_context_restores_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTX_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "rollout.jsonl"
    raw = _lines(_rollout(_token_count(244_800)))
    path.write_bytes(raw)
    age(path, 120)
    invoke(["doctor", str(path)], code=1)
    assert "repaired; the originals are in" in invoke(["doctor", str(path), "--fix"]).stderr
    assert "healthy" in invoke(["doctor", str(path)]).stderr
    assert invoke(["restore", str(path)]).stdout_bytes == raw


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param([_token_count(244_799)], id="under-the-limit"),
        pytest.param([_token_count(600_000), _token_count(30_000)], id="a-later-figure-counts"),
        pytest.param([_token_count(None)], id="no-figure"),
    ],
)
def test_a_saved_context_codex_does_not_compact_on_is_healthy(tail: list[Any]) -> None:
    assert diagnose(_lines(_rollout(*tail))).problems == []


def test_a_history_that_is_that_large_is_not_flagged() -> None:
    """Codex is right to compact a history over its limit: no figure to fix."""
    outputs = [
        _codex_item({"type": "function_call_output", "call_id": f"c{n}", "output": "y" * 250_000})
        for n in range(4)
    ]
    calls = [
        _codex_item({"type": "function_call", "call_id": f"c{n}", "name": "shell", "arguments": ""})
        for n in range(4)
    ]
    records = _rollout(*[x for pair in zip(calls, outputs, strict=True) for x in pair])
    assert diagnose(_lines([*records, _token_count(250_000)])).problems == []


def test_only_the_history_after_the_last_compaction_counts() -> None:
    """A compaction replaces the history: a figure from before it is stale."""
    big = "z" * 990_000
    compacted = {"type": "compacted", "payload": {"message": "summary", "replacement_history": []}}
    raw = _lines([*_rollout(_token_count(250_000), compacted, history=big)])
    assert [p.kind for p in diagnose(raw, max_line_bytes=2_000_000).problems] == [
        "codex_stale_token_count"
    ]
    uncompacted = _lines([*_rollout(_token_count(250_000), history=big)])
    assert diagnose(uncompacted, max_line_bytes=2_000_000).problems == []


def test_a_session_the_hook_wrote_is_healthy(tmp_path: Path) -> None:
    """The hook's previews (ctx hints in the output and toolUseResult) are no problem."""
    from support.hooked_sessions import hooked_session

    session = hooked_session(tmp_path, hooks=True)
    assert "[ctx: output truncated" in session.read_text()
    result = invoke(["doctor", str(session)])
    assert "healthy" in result.stdout + result.stderr
    assert "problem" not in (result.stdout + result.stderr).lower()


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_repair_in_place_writes_what_the_repair_makes(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In place, the repaired bytes are written as they are made and read back to be
    # checked: the file, its record and the check are those of the held repair.
    monkeypatch.setenv("CTX_DATA_DIR", str(tmp_path / "data"))
    raw = CASES[case](_base())
    held = plan_fixes(raw, Preview(str(tmp_path / "off")), max_line_bytes=20_000)
    path = tmp_path / "s.jsonl"
    path.write_bytes(raw)
    repair, change = fix_in_place(path, force=True, max_line_bytes=20_000)
    assert change.record is not None
    written = path.read_bytes()
    assert repair.output == b"" and repair.output_bytes == len(written)
    assert repair.output_sha256 == hashlib.sha256(written).hexdigest()
    # Texts moved to files are cited by where each repair keeps them.
    cites = ((str(tmp_path / "off"), "<kept>"), (str(change.record), "<kept>"))

    def cited(data: bytes | str) -> str:
        text = data.decode() if isinstance(data, bytes) else data
        for where, name in cites:
            text = text.replace(where, name)
        return text

    assert cited(written) == cited(held.output)
    assert [cited(n) for n in repair.notes] == [cited(n) for n in held.notes]
    assert (repair.fixed, repair.remaining) == (held.fixed, [])
    manifest = orjson.loads((change.record / "manifest.json").read_bytes())
    assert manifest["output"]["sha256"] == repair.output_sha256
    assert restore_file(path) == raw


@pytest.mark.slow
@pytest.mark.real_data
def test_a_large_repair_holds_neither_its_output_nor_two_readings(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 24 MiB of one real session repeated (the bench's 1 GB case, smaller): each copy
    # is a second root, so every copy is repaired. Held whole, with the output read
    # again beside the records, the repair peaked at 7.6x the file; streamed, 4.4x.
    monkeypatch.setenv("CTX_DATA_DIR", str(tmp_path / "data"))
    raw = repeated_session((shared / "cc_spotter_4d5611e5.jsonl").read_bytes(), 24 << 20)
    path = tmp_path / "s.jsonl"
    path.write_bytes(raw)
    tracemalloc.start()
    try:
        repair, _change = fix_in_place(path, force=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert repair.changed_lines > 0 and repair.output_bytes == path.stat().st_size
    assert peak < 5.5 * len(raw), f"peak {peak / len(raw):.1f}x the file"
