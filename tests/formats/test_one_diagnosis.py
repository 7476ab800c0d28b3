"""``ctx validate`` and ``ctx doctor`` are one engine: the same rules name the same problems.

Issue 40 item 2: on ``cc_mclaude_c76e5be5`` validate named line 858 and doctor lines 378,
858, 859 and 860, through two parsers, two ``Problem`` types and two JSON shapes. Now
validate runs the transcript rules of the doctor's engine, and the doctor those and the
client's: for every rule both ran, both name the same problems, and the client's rules
are the doctor's alone. The pairing rule is one function for validate, the doctor's
checks and repairs, and the stages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcli import api
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.core.pairing import unpaired
from ctxcli.formats.diagnose import TRANSCRIPT_RULES
from ctxcli.sessions import diagnose
from ctxcli.stages._validity import validity_problems
from support.cli import invoke
from support.paths import SHARED, shared_transcripts

MCLAUDE = "cc_mclaude_c76e5be5.jsonl"


def _named(problems: list[dict[str, Any]], rules: list[str]) -> set[tuple[Any, ...]]:
    return {(p["line"], p["kind"], p["message"]) for p in problems if p["rule"] in rules}


@pytest.mark.real_data
def test_validate_and_doctor_name_the_same_problems_on_mclaude() -> None:
    path = str(SHARED / MCLAUDE)
    checked = orjson.loads(
        invoke(["validate", "--on-invalid", "keep", "--json", path], code=1).stdout
    )
    doctored = orjson.loads(invoke(["doctor", "--json", path], code=1).stdout)
    # One envelope: files and failed, a single file's entry at the top too.
    for payload in (checked, doctored):
        assert payload["failed"] == 1 and payload["files"][0]["input"] == path
        assert {"input", "format", "rules", "problems", "valid"} <= set(payload)
    validate_rules, doctor_rules = checked["rules"], doctored["rules"]
    assert validate_rules == [r.name for r in TRANSCRIPT_RULES]
    assert doctor_rules[: len(validate_rules)] == validate_rules
    assert _named(checked["problems"], validate_rules) == _named(
        doctored["problems"], validate_rules
    )
    # The lines of the issue: 858 (its result was on 859) and 859 for both; the client's
    # rules (the chain, the payload stored twice) are the doctor's alone.
    assert sorted((p["line"], p["kind"]) for p in checked["problems"]) == [
        (858, "unanswered_call"),
        (859, "malformed_line"),
    ]
    assert sorted((p["line"], p["kind"]) for p in doctored["problems"]) == [
        (378, "duplicate_tool_use_result"),
        (858, "unanswered_call"),
        (859, "malformed_line"),
        (860, "chain_starts_with_assistant"),
        (860, "dangling_parent"),
    ]


def _line_transcripts() -> list[Path]:
    return [p for p in shared_transcripts() if p.suffix == ".jsonl"]


@pytest.mark.real_data
@pytest.mark.parametrize("path", _line_transcripts(), ids=lambda p: p.stem)
def test_the_transcript_rules_agree_on_every_real_file(path: Path) -> None:
    raw = path.read_bytes()
    checked = api.validate(path, on_invalid="keep", raw=raw)
    doctored = diagnose(raw, str(path))
    both = set(checked.rules)
    assert both <= set(doctored.rules)

    def named(problems: list[Any]) -> list[tuple[Any, ...]]:
        return sorted((p.line, p.kind, p.message) for p in problems if p.rule in both)

    assert named(checked.problems) == named(doctored.problems)
    assert checked.format == doctored.format


def test_the_output_says_which_rules_ran(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    err = invoke(["validate", str(path)]).stderr
    assert "ctx: rules: json_lines, tool_pairs" in err
    assert (
        "ctx: rules (openai_chat): json_lines, tool_pairs" in invoke(["doctor", str(path)]).stderr
    )


# -- one pairing rule ----------------------------------------------------------------------


def _call(call_id: str, group: str | None = None) -> Message:
    return Message("assistant", (Block(Kind.TOOL_CALL, "{}", call_id, "bash"),), None, group)


def _result(call_id: str) -> Message:
    return Message("user", (Block(Kind.TOOL_RESULT, "ok", call_id),))


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        # A final call (or calls of the final response) may still be running.
        ([_call("a")], []),
        ([_call("a", "r"), _call("b", "r")], []),
        # Not final once a user turn follows it.
        ([_call("a"), Message("user", (Block(Kind.TEXT, "hm"),))], [("unanswered_call", "a")]),
        ([_call("a"), _call("b")], [("unanswered_call", "a")]),
        # A result answers an earlier call only.
        ([_result("a"), _call("a")], [("orphan_result", "a")]),
        ([_call("a"), _result("a"), _result("b")], [("orphan_result", "b")]),
    ],
)
def test_one_pairing_rule_for_validate_doctor_and_stages(
    messages: list[Message], expected: list[tuple[str, str]]
) -> None:
    conv = Conversation(tuple(messages))
    assert [(u.kind, u.call_id) for u in unpaired(conv)] == expected
    # A stage may not add to them: the guard counts what the rule finds.
    empty = Conversation(())
    worse = validity_problems(empty, conv)
    assert bool(worse) == bool(expected)


# -- issue 41 item 18: a JSON document of a format ctx does not know ------------------------


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('{\n  "foo": [1]\n}\n', "a JSON object (keys: 'foo')"),
        # Cline's ui_messages.json: an array of {ts, type, say, text}, pretty-printed.
        (
            '[\n  {\n    "ts": 1, "type": "say", "say": "text", "text": "hi"\n  }\n]\n',
            "a JSON array of 1 item",
        ),  # fmt: skip
    ],
)
@pytest.mark.parametrize("command", ["validate", "stats", "reduce"])
def test_a_json_document_of_another_format_is_named_so(
    text: str, what: str, command: str, tmp_path: Path
) -> None:
    path = tmp_path / "ui_messages.json"
    path.write_text(text, encoding="utf-8")
    args = [
        command,
        str(path),
        *(["-o", str(tmp_path / "out.json")] if command == "reduce" else []),
    ]
    err = invoke(args, code=2).stderr
    assert err.startswith(f"ctx: error: {path}: not a transcript format ctx reads: {what}")
    assert "claude_code, codex" in err and "openhands_output" in err
    assert "--on-invalid" not in err and "fix the line" not in err
    assert not (tmp_path / "out.json").exists()
