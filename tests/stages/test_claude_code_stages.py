"""The Claude Code resume stages on small hand-written sessions.

Every run here also checks the promises all of them make: the output restores to the
input byte for byte, passes `ctx validate`, has no assistant record with empty
content, and reducing it again changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxcli.api import Report, reduce_bytes, reduce_file, restore_file
from ctxcli.core.errors import ConfigError
from ctxcli.core.usage import is_usage_stub
from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.sessions import diagnose
from support.paths import FIXTURES, need_shared

FIX = FIXTURES / "claude_code_resume"
SESSION = FIX / "session.jsonl"


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


def by_uuid(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["uuid"]: r for r in records if "uuid" in r}


def run(
    stages: list[dict[str, Any]], source: Path, tmp_path: Path
) -> tuple[Report, list[dict[str, Any]], Path]:
    """Reduce ``source`` with ``stages`` and check restore, validity and idempotency."""
    config = build_config({"stages": stages}, "test")
    raw = source.read_bytes()
    out = tmp_path / "out.jsonl"
    report, data = reduce_file(source, out, config=config)
    assert restore_file(out) == raw
    assert validate_bytes(data, str(out)) == []
    records = [json.loads(line) for line in data.splitlines()]
    for rec in records:
        if rec.get("type") == "assistant" and not is_usage_stub(rec):
            assert rec["message"]["content"], f"empty assistant record {rec['uuid']}"
    again = reduce_bytes(data, config=config, path=str(out))
    assert again.output == data, "a second reduction changed the output"
    assert not again.report.changed
    return report, records, out


def counters(report: Report, stage: str) -> dict[str, int]:
    return next(s for s in report.stages if s.stage == stage).counters


def notes(report: Report) -> list[str]:
    return [n for s in report.stages for n in s.notes]


# --- prune_sidecars --------------------------------------------------------------------


def test_prune_sidecars_drops_ui_copies_and_relinks(tmp_path: Path) -> None:
    report, records, out = run([{"use": "prune_sidecars"}], SESSION, tmp_path)
    assert not [r for r in records if "toolUseResult" in r]
    assert not [r for r in records if r["type"] == "progress"]
    # The first snapshot of u-01 is superseded by its update; u-07's stays.
    snapshots = [r for r in records if r["type"] == "file-history-snapshot"]
    assert [(s["messageId"], s["isSnapshotUpdate"]) for s in snapshots] == [
        ("a-04", True),
        ("u-07", False),
    ]
    uuids = by_uuid(records)
    assert uuids["u-03"]["parentUuid"] == "a-04"  # was the dropped progress p-02
    assert uuids["u-08"]["parentUuid"] == "a-09"  # was the dropped progress p-04
    assert report.tokens_before == report.tokens_after  # the model saw none of it
    assert report.bytes_after < report.bytes_before * 0.8
    assert counters(report, "prune_sidecars") == {
        "fields_removed": 5,
        "records_dropped": 4,
        "snapshots_dropped": 1,
        "constant_fields_removed": 0,
    }
    # The stats count the records it touched, though no message changed.
    assert report.stages[0].changed == 4 + 1 + 5
    # Edit's originalFile was never in the model's context: it is offloaded to read.
    original = (
        out.parent / "out.jsonl.offload" / "prune_sidecars" / "toolu_02.original"
    ).read_text()
    assert original.startswith("     1:import json")


def test_prune_sidecars_options_choose_what_goes(tmp_path: Path) -> None:
    stage = {
        "use": "prune_sidecars",
        "fields": [],
        "records": ["progress:bash_progress"],
        "file_history": "keep",
    }
    report, records, _ = run([stage], SESSION, tmp_path)
    progress = [r["data"]["type"] for r in records if r["type"] == "progress"]
    assert progress == ["hook_progress", "hook_progress"]
    assert len([r for r in records if "toolUseResult" in r]) == 5
    assert len([r for r in records if r["type"] == "file-history-snapshot"]) == 3


def test_prune_sidecars_refuses_to_drop_messages() -> None:
    with pytest.raises(ConfigError, match="holds messages the model sees"):
        build_config({"stages": [{"use": "prune_sidecars", "records": ["assistant"]}]}, "t")


def test_prune_sidecars_undoes_itself_rather_than_split_the_tree(tmp_path: Path) -> None:
    # A progress record at the root with two kept children: dropping it would leave
    # two roots in one conversation.
    records = lines_of(SESSION)
    root = {**records[4], "parentUuid": None}  # p-01
    first = {**records[1], "parentUuid": "p-01"}  # u-01
    other = {**records[22], "parentUuid": "p-01"}  # u-07
    source = write(tmp_path / "in.jsonl", [root, first, other])
    report, out, _ = run([{"use": "prune_sidecars"}], source, tmp_path)
    assert [r["uuid"] for r in out] == ["p-01", "u-01", "u-07"]
    assert any("left unchanged" in n and "roots" in n for n in notes(report))
    assert counters(report, "prune_sidecars") == dict.fromkeys(
        ("fields_removed", "records_dropped", "snapshots_dropped", "constant_fields_removed"), 0
    )


# --- clear_thinking --------------------------------------------------------------------


def thinking_records(records: list[dict[str, Any]]) -> list[str]:
    return [
        r["uuid"]
        for r in records
        if r["type"] == "assistant"
        and not is_usage_stub(r)
        and any(b.get("type") == "thinking" for b in r["message"]["content"])
    ]


def test_clear_thinking_keeps_the_last_turn_and_drops_emptied_records(tmp_path: Path) -> None:
    report, records, out = run([{"use": "clear_thinking"}], SESSION, tmp_path)
    assert thinking_records(records) == ["a-10"]
    uuids = by_uuid(records)
    for gone in ("a-01", "a-03", "a-08"):
        assert gone not in uuids
    # Each was the first record of its response: what usage trackers read stays.
    stubs = [r["message"]["id"] for r in records if is_usage_stub(r)]
    source = {r.get("uuid"): r for r in lines_of(SESSION)}
    assert stubs == [source[g]["message"]["id"] for g in ("a-01", "a-03", "a-08")]
    # Their children hang off their parents now: the chain is unbroken.
    assert uuids["a-02"]["parentUuid"] == "u-01"
    assert uuids["a-04"]["parentUuid"] == "u-02"
    assert uuids["a-09"]["parentUuid"] == "u-07"
    assert counters(report, "clear_thinking") == {
        "turns_cleared": 3,
        "blocks_removed": 3,
        "records_dropped": 3,
        "chars_removed": 110,
    }
    saved = out.parent / "out.jsonl.offload" / "clear_thinking" / "msg_01"
    assert saved.read_text() == "I should read app.py first, then edit total()."


def test_clear_thinking_keep_turns(tmp_path: Path) -> None:
    _, records, _ = run([{"use": "clear_thinking", "keep_turns": 2}], SESSION, tmp_path)
    assert thinking_records(records) == ["a-08", "a-10"]


def test_clear_thinking_keeps_what_followed_a_dropped_record(tmp_path: Path) -> None:
    # A snapshot written between the thinking record and the rest of the response
    # belongs to that response: it must not go with the record.
    records = lines_of(SESSION)
    snapshot = {**records[0], "messageId": "u-01x"}
    source = write(tmp_path / "in.jsonl", [*records[1:3], snapshot, *records[3:]])
    _, out, _ = run([{"use": "clear_thinking"}], source, tmp_path)
    assert "a-01" not in by_uuid(out)
    assert [r for r in out if r.get("messageId") == "u-01x"]


def test_clear_thinking_on_anthropic_messages_keeps_the_text(tmp_path: Path) -> None:
    turns = [
        {"role": "user", "content": "Hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Greet back.", "signature": "sig1"},
                {"type": "text", "text": "Hello!"},
            ],
        },
        {"role": "user", "content": "Bye"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Say bye.", "signature": "sig2"},
                {"type": "text", "text": "Goodbye!"},
            ],
        },
    ]
    source = write(tmp_path / "in.jsonl", turns)
    _, out, _ = run([{"use": "clear_thinking"}], source, tmp_path)
    assert out[1]["content"] == [{"type": "text", "text": "Hello!"}]
    assert out[3] == turns[3]


def test_clear_thinking_leaves_other_formats_alone(tmp_path: Path) -> None:
    source = write(tmp_path / "in.jsonl", [{"role": "user", "content": "hi"}])
    report, out, _ = run([{"use": "clear_thinking"}], source, tmp_path)
    assert notes(report) == ["not applicable to openai_chat transcripts"]


# --- strip_system_reminders ----------------------------------------------------------


def result_text(records: list[dict[str, Any]], uuid: str) -> str:
    return str(by_uuid(records)[uuid]["message"]["content"][0]["content"])


def test_strip_system_reminders_keeps_the_first(tmp_path: Path) -> None:
    original = lines_of(SESSION)
    report, records, _ = run([{"use": "strip_system_reminders"}], SESSION, tmp_path)
    assert result_text(records, "u-02") == result_text(original, "u-02")
    listing = result_text(original, "u-04").split("\n\n<system-reminder>")[0]
    assert result_text(records, "u-04") == listing
    assert result_text(records, "u-05") == listing
    assert result_text(records, "u-08") == "..\n2 passed in 0.01s\n"
    assert counters(report, "strip_system_reminders")["reminders_removed"] == 3


def test_strip_system_reminders_never_leaves_an_empty_result(tmp_path: Path) -> None:
    records = lines_of(SESSION)
    reminder = "<system-reminder>Be careful.</system-reminder>"
    records[5]["message"]["content"][0]["content"] = f"ok\n{reminder}"
    records[9]["message"]["content"][0]["content"] = reminder
    source = write(tmp_path / "in.jsonl", records)
    _, out, _ = run([{"use": "strip_system_reminders"}], source, tmp_path)
    assert result_text(out, "u-02") == f"ok\n{reminder}"
    assert result_text(out, "u-03") == "[ctx: repeated system reminder removed]"


def test_strip_system_reminders_in_text_only_when_asked(tmp_path: Path) -> None:
    reminder = "<system-reminder>Todo list is empty.</system-reminder>"
    records = lines_of(FIX / "clean.jsonl")
    records[0]["message"]["content"] = f"What does app.py do?\n\n{reminder}"
    records.append({**records[0], "uuid": "c-06", "parentUuid": "c-05"})
    source = write(tmp_path / "in.jsonl", records)
    report, _, _ = run([{"use": "strip_system_reminders"}], source, tmp_path)
    assert not report.changed
    _, out, _ = run([{"use": "strip_system_reminders", "include_text": True}], source, tmp_path)
    assert by_uuid(out)["c-06"]["message"]["content"] == "What does app.py do?"


# --- dedupe_outputs --------------------------------------------------------------------


def test_dedupe_outputs_stubs_stale_reads_and_repeats(tmp_path: Path) -> None:
    original = lines_of(SESSION)
    report, records, out = run([{"use": "dedupe_outputs"}], SESSION, tmp_path)
    offload = f"{out}.offload"
    assert result_text(records, "u-02") == (
        "[ctx: stale read of /home/dev/shop/app.py: the file was edited later; "
        f"this read is saved to {offload}/dedupe_outputs/toolu_01]"
    )
    assert result_text(records, "u-05") == (
        "[ctx: same output as the earlier Bash result toolu_03; full text saved to "
        f"{offload}/dedupe_outputs/toolu_03]"
    )
    assert result_text(records, "u-04") == result_text(original, "u-04")
    saved = Path(offload) / "dedupe_outputs"
    assert (saved / "toolu_01").read_text() == result_text(original, "u-02")
    assert (saved / "toolu_03").read_text() == result_text(original, "u-05")
    assert counters(report, "dedupe_outputs")["stale_reads"] == 1
    assert counters(report, "dedupe_outputs")["duplicates"] == 1


def test_a_long_call_id_names_its_file_by_its_tail_and_the_hint_by_the_whole_id(
    tmp_path: Path,
) -> None:
    # A real Claude Code id is "toolu_01" and 22 characters; the file keeps its last 8
    # (stages._naming: the hint is read on every later call), the hint still names the
    # earlier call by the id the agent can find in its transcript.
    long_id = "toolu_01AbCdEfGhIjKlMnOpQrStUv"
    source = tmp_path / "long.jsonl"
    source.write_bytes(SESSION.read_bytes().replace(b'"toolu_03"', f'"{long_id}"'.encode()))
    _, records, out = run([{"use": "dedupe_outputs"}], source, tmp_path)
    assert result_text(records, "u-05") == (
        f"[ctx: same output as the earlier Bash result {long_id}; full text saved to "
        f"{out}.offload/dedupe_outputs/{long_id[-8:]}]"
    )


def test_a_failed_edit_leaves_the_read_current(tmp_path: Path) -> None:
    records = lines_of(SESSION)
    failed = records[9]["message"]["content"][0]
    failed.update(content="<tool_use_error>String to replace not found</tool_use_error>")
    failed["is_error"] = True
    source = write(tmp_path / "in.jsonl", records)
    _, out, _ = run([{"use": "dedupe_outputs", "stale_reads": True}], source, tmp_path)
    assert result_text(out, "u-02") == result_text(records, "u-02")


def test_a_read_after_the_last_edit_stays(tmp_path: Path) -> None:
    records = lines_of(SESSION)
    # Move the Edit call's tool input to another file: the read of app.py is current.
    records[7]["message"]["content"][0]["input"]["file_path"] = "/home/dev/shop/other.py"
    source = write(tmp_path / "in.jsonl", records)
    _, out, _ = run([{"use": "dedupe_outputs", "min_chars": 100_000}], source, tmp_path)
    assert out == lines_of(source)
    _, out, _ = run([{"use": "dedupe_outputs"}], source, tmp_path)
    assert result_text(out, "u-02") == result_text(records, "u-02")


# --- drop_before_compaction --------------------------------------------------------------


def without_stubs(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if not is_usage_stub(r)]


def test_drop_before_compaction_keeps_boundary_summary_and_settings(tmp_path: Path) -> None:
    report, records, out = run([{"use": "drop_before_compaction"}], SESSION, tmp_path)
    # What usage trackers read of the dropped responses stays: one stub per response.
    stubs = [r for r in records if is_usage_stub(r)]
    boundary_at = next(i for i, r in enumerate(lines_of(SESSION)) if r.get("subtype"))
    firsts: dict[str, dict[str, Any]] = {}
    for r in lines_of(SESSION)[:boundary_at]:
        if r.get("type") == "assistant" and "usage" in r["message"]:
            firsts.setdefault(r["message"]["id"], r)
    assert [s["message"]["id"] for s in stubs] == list(firsts)
    for stub in stubs:
        first = firsts[stub["message"]["id"]]
        assert stub["message"]["model"] == first["message"]["model"]
        assert stub["timestamp"] == first["timestamp"]
        assert stub["message"]["usage"]["input_tokens"] == first["message"]["usage"]["input_tokens"]
        assert "uuid" not in stub and "content" not in stub["message"]
    records = without_stubs(records)
    assert [r.get("uuid", r["type"]) for r in records[:4]] == [
        "custom-title",
        "s-02",
        "u-06",
        "file-history-snapshot",
    ]
    boundary = records[1]
    assert boundary["parentUuid"] is None and boundary["logicalParentUuid"] is None
    summary = records[2]["message"]["content"]
    path = f"{out}.offload/drop_before_compaction/r1-r16"
    assert summary.endswith(
        f"\n\n[ctx: the 12 messages before this compaction are saved to {path}]"
    )
    assert "Add a discount parameter" in Path(path).read_text()
    assert counters(report, "drop_before_compaction") == {
        "messages_dropped": 12,
        "records_dropped": 6,
        "records_kept": 1,
    }
    # What a resume sends is the same, plus the line naming the file.
    assert report.resume_tokens_before is not None and report.resume_tokens_after is not None
    assert 0 < report.resume_tokens_after - report.resume_tokens_before < 80
    assert report.tokens_after < report.tokens_before


def test_drop_before_compaction_without_citing(tmp_path: Path) -> None:
    stage = {"use": "drop_before_compaction", "cite_in_summary": False}
    report, records, _ = run([stage], SESSION, tmp_path)
    assert without_stubs(records)[2] == lines_of(SESSION)[20]
    assert report.resume_tokens_after == report.resume_tokens_before


@pytest.mark.parametrize(
    ("change", "note"),
    [
        # The leaf's chain never reaches the boundary: the client resumes the whole file.
        ("split", "no compaction boundary"),
        ("preserved", "the boundary preserves earlier messages; kept"),
    ],
)
def test_drop_before_compaction_leaves_preserved_context(
    tmp_path: Path, change: str, note: str
) -> None:
    if change == "split":
        source = FIX / "split_tree.jsonl"
    else:
        records = lines_of(SESSION)
        records[19]["compactMetadata"]["preservedSegment"] = {"headUuid": "u-05"}
        source = write(tmp_path / "in.jsonl", records)
    report, out, _ = run([{"use": "drop_before_compaction"}], source, tmp_path)
    assert out == lines_of(source)
    assert any(n.startswith(note) for n in notes(report))


# --- the whole chain ------------------------------------------------------------------------


STAGES = [
    "drop_before_compaction",
    "prune_sidecars",
    "clear_thinking",
    "strip_system_reminders",
    "dedupe_outputs",
]


@pytest.mark.parametrize("stage", STAGES)
def test_noop_on_a_clean_session(tmp_path: Path, stage: str) -> None:
    source = FIX / "clean.jsonl"
    report, _, out = run([{"use": stage}], source, tmp_path)
    assert out.read_bytes() == source.read_bytes()
    assert not report.changed
    assert report.stages[0].offloaded == 0


def test_the_stages_together(tmp_path: Path) -> None:
    report, records, _ = run([{"use": s} for s in STAGES], SESSION, tmp_path)
    stub_bytes = sum(
        len(json.dumps(r, separators=(",", ":"))) + 1 for r in records if is_usage_stub(r)
    )
    records = without_stubs(records)
    assert [r["type"] for r in records] == [
        "custom-title",
        "system",
        "user",
        "file-history-snapshot",
        "user",
        "assistant",
        "user",
        "assistant",
        "assistant",
        "system",
    ]
    assert report.bytes_after - stub_bytes < report.bytes_before / 3
    # u-08's reminder repeats one that went with the messages before the boundary,
    # which the model no longer sees: so it stays.
    assert "<system-reminder>" in result_text(records, "u-08")


def test_doctor_reports_a_second_root(tmp_path: Path) -> None:
    records = lines_of(FIX / "clean.jsonl")
    kinds = {p.kind for p in diagnose(SESSION.read_bytes()).problems}
    assert "extra_root" not in kinds  # its second root is a boundary
    records[3]["parentUuid"] = None
    problems = diagnose(write(tmp_path / "in.jsonl", records).read_bytes()).problems
    assert [(p.line, p.kind) for p in problems if p.kind == "extra_root"] == [(4, "extra_root")]
    # A subagent's sidechain has a root of its own.
    records[3]["isSidechain"] = True
    again = diagnose(write(tmp_path / "in.jsonl", records).read_bytes()).problems
    assert "extra_root" not in {p.kind for p in again}


def test_constant_envelope_fields_stay_on_the_first_record_only(tmp_path: Path) -> None:
    # cozempic's envelope-strip, done losslessly: the value is kept once, and the
    # restore pack holds every original record.
    src = need_shared() / "cc_spotter_4d5611e5_subagent_a2898e3.jsonl"
    fields = ["cwd", "version", "gitBranch", "slug", "userType"]
    stage = {"use": "prune_sidecars", "records": [], "constant_fields": [*fields, "uuid"]}
    config = build_config({"stages": [stage]}, "t")
    report, out = reduce_file(src, tmp_path / "out", config=config, offload_dir=tmp_path / "off")
    records = [json.loads(line) for line in out.splitlines()]
    originals = [json.loads(line) for line in src.read_bytes().splitlines()]
    for name in fields:
        first = next(i for i, r in enumerate(originals) if name in r)
        assert [i for i, r in enumerate(records) if name in r] == [first], name
        assert records[first][name] == originals[first][name]
    assert all("uuid" in r for r in records)  # differs per record: never constant
    assert report.bytes_after < report.bytes_before
    assert reduce_bytes(out, config=config).output == out
    assert restore_file(tmp_path / "out", offload_dir=tmp_path / "off") == src.read_bytes()
    assert validate_bytes(out) == []
