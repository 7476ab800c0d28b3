"""keep_last: the last n messages, with the cut moved so no tool call loses its result."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxcli.api import reduce_file, restore_file
from ctxcli.core.cuts import is_user_turn, latest_safe_cut, safe_cuts
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.stages.base import StageResult
from support.stage_helpers import SYNAPTIC as FIXTURES
from support.stage_helpers import fixture, run


def kept_keys(result: StageResult) -> list[int | None]:
    return [m.key for m in result.conversation.messages]


# parallel.jsonl, by record: 0 system, 1 user, 2 assistant calling c1 c2 c3, 3-5 their
# results (c2 first), 6 text + call c4, 7 result, 8 call c5, 9 result, 10 text, 11 user,
# 12 assistant calling c6 c7, 13-14 results (c7 first), 15 final text.
@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, [0, 15]),
        # The last two are c6's result and the final text: c6/c7 and their call move in.
        (2, [0, 12, 13, 14, 15]),
        (3, [0, 12, 13, 14, 15]),
        (4, [0, 12, 13, 14, 15]),
        (5, [0, 11, 12, 13, 14, 15]),
        (6, [0, *range(10, 16)]),
        # Cutting before 9 would orphan c5's result: the call (8) comes along.
        (7, [0, *range(8, 16)]),
        (10, [0, *range(6, 16)]),
        # Records 3-5 answer the parallel calls in 2: the whole round stays.
        (11, [0, *range(2, 16)]),
        (12, [0, *range(2, 16)]),
        (14, [0, *range(2, 16)]),
        (15, list(range(16))),
        (40, list(range(16))),
    ],
)
def test_cut_moves_back_to_a_safe_boundary(n: int, expected: list[int]) -> None:
    result = run("keep_last", fixture("parallel.jsonl"), keep_messages=n)
    assert kept_keys(result) == expected
    assert result.counters["dropped"] == 16 - len(expected)


def test_counters_and_notes_say_how_far_the_cut_moved() -> None:
    result = run("keep_last", fixture("parallel.jsonl"), keep_messages=2)
    assert result.counters == {"dropped": 11, "cut_moved": 2}
    assert result.notes == (
        "dropped 11 messages; their text is in off/keep_last/r1-r11",
        "kept 2 more messages so no tool call loses its result",
    )


def test_nothing_to_drop_is_a_noop() -> None:
    conv = fixture("parallel.jsonl")
    result = run("keep_last", conv, keep_messages=15)
    assert result.conversation is conv
    assert result.counters == {"dropped": 0, "cut_moved": 0}
    assert result.notes == ("15 non-system messages <= keep_messages 15; nothing dropped",)


def test_reused_call_ids_are_paired_by_position() -> None:
    # tau-bench reuses one call id for every call: the cut must still not orphan.
    result = run("keep_last", fixture("repeated_ids.jsonl"), keep_messages=2)
    assert kept_keys(result) == [0, 6, 7, 8]
    result = run("keep_last", fixture("repeated_ids.jsonl"), keep_messages=3)
    assert kept_keys(result) == [0, 6, 7, 8]


def _msg(role: str, *blocks: Block, key: int, group: str | None = None) -> Message:
    return Message(role, tuple(blocks), key, group)


def _call(cid: str) -> Block:
    return Block(Kind.TOOL_CALL, "{}", cid, "Bash")


def _result(cid: str) -> Block:
    return Block(Kind.TOOL_RESULT, f"out {cid}", cid)


def test_claude_code_interleaved_response_stays_whole() -> None:
    # Claude Code 2.1.39 writes one record per block and puts each result right after
    # its call: T1 R1 T2 R2 of one response. Cutting between R1 and T2 would keep a
    # half response whose first call lost its answer.
    conv = Conversation(
        (
            _msg("user", Block(Kind.TEXT, "go"), key=0),
            _msg("assistant", Block(Kind.TEXT, "running both"), key=1, group="m1"),
            _msg("assistant", _call("t1"), key=2, group="m1"),
            _msg("user", _result("t1"), key=3),
            _msg("assistant", _call("t2"), key=4, group="m1"),
            _msg("user", _result("t2"), key=5),
            _msg("assistant", Block(Kind.TEXT, "both done"), key=6, group="m2"),
        )
    )
    assert kept_keys(run("keep_last", conv, keep_messages=1)) == [6]
    assert kept_keys(run("keep_last", conv, keep_messages=2)) == [1, 2, 3, 4, 5, 6]
    assert kept_keys(run("keep_last", conv, keep_messages=4)) == [1, 2, 3, 4, 5, 6]
    safe = safe_cuts(conv, 0)
    assert [c for c, ok in enumerate(safe) if ok] == [0, 1, 6, 7]


def test_results_spread_over_messages_before_their_calls_end() -> None:
    # Claude Code 2.1.6: calls T1 T2 first, then the results in separate records.
    conv = Conversation(
        (
            _msg("user", Block(Kind.TEXT, "go"), key=0),
            _msg("assistant", _call("a"), key=1, group="m"),
            _msg("assistant", _call("b"), key=2, group="m"),
            _msg("user", _result("b"), key=3),
            _msg("user", _result("a"), key=4),
            _msg("assistant", Block(Kind.TEXT, "ok"), key=5),
        )
    )
    assert kept_keys(run("keep_last", conv, keep_messages=2)) == [1, 2, 3, 4, 5]
    assert latest_safe_cut(conv, 0, 3) == 1


def test_a_call_answered_twice_keeps_both_results() -> None:
    conv = Conversation(
        (
            _msg("user", Block(Kind.TEXT, "go"), key=0),
            _msg("assistant", _call("a"), key=1),
            _msg("tool", _result("a"), key=2),
            _msg("user", Block(Kind.TEXT, "again?"), key=3),
            _msg("tool", _result("a"), key=4),
            _msg("assistant", Block(Kind.TEXT, "ok"), key=5),
        )
    )
    assert kept_keys(run("keep_last", conv, keep_messages=2)) == [1, 2, 3, 4, 5]


def test_start_on_user_moves_the_cut_to_a_user_turn() -> None:
    result = run("keep_last", fixture("parallel.jsonl"), keep_messages=2, start_on_user=True)
    assert kept_keys(result) == [0, *range(11, 16)]


def test_a_user_message_of_only_tool_results_is_not_a_user_turn() -> None:
    # Anthropic and Claude Code give tool results role "user": no turn starts there.
    assert not is_user_turn(Message("user", (_result("x"),)))
    assert is_user_turn(Message("user", (_result("x"), Block(Kind.TEXT, "and also"))))


def test_no_safe_cut_keeps_everything() -> None:
    conv = Conversation(
        (
            _msg("user", Block(Kind.TEXT, "go"), key=0),
            _msg("assistant", _call("a"), key=1),
            _msg("assistant", _call("b"), key=2),
            _msg("tool", _result("b"), key=3),
            _msg("tool", _result("a"), key=4),
        )
    )
    # Only the user message could go, and the user asked to start on a user turn.
    result = run("keep_last", conv, keep_messages=1, start_on_user=True)
    assert result.conversation is conv
    assert result.notes == (
        "no cut point keeps every tool call with its result and starts on a user turn; "
        "nothing dropped",
    )


def test_system_messages_later_on_are_not_counted() -> None:
    conv = Conversation(
        (
            _msg("system", Block(Kind.TEXT, "rules"), key=0),
            _msg("user", Block(Kind.TEXT, "one"), key=1),
            _msg("assistant", Block(Kind.TEXT, "two"), key=2),
            _msg("system", Block(Kind.TEXT, "reminder"), key=3),
            _msg("user", Block(Kind.TEXT, "three"), key=4),
        )
    )
    assert kept_keys(run("keep_last", conv, keep_messages=2)) == [0, 2, 3, 4]


def test_end_to_end_offloads_restores_and_is_idempotent(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes((FIXTURES / "parallel.jsonl").read_bytes())
    config = build_config({"stages": [{"use": "keep_last", "keep_messages": 2}]}, "test")
    report, out = reduce_file(source, tmp_path / "out.jsonl", config=config, offload_dir="off")
    lines = source.read_bytes().splitlines(keepends=True)
    assert out == b"".join([lines[0], *lines[12:]])
    assert validate_bytes(out) == []
    # The agent can read what was dropped.
    dropped = (Path("off") / "keep_last" / "r1-r11").read_text()
    assert "--- message 1 (user) ---\nThe add test fails. Fix src/calc.py." in dropped
    assert "[tool result bash id=c2]\nExit code: 1" in dropped
    assert restore_file(tmp_path / "out.jsonl", offload_dir="off") == source.read_bytes()
    _, again = reduce_file(tmp_path / "out.jsonl", config=config, offload_dir="again")
    assert again == out
    assert report.stages[0].counters == {"dropped": 11, "cut_moved": 2}


def test_keep_messages_must_be_positive() -> None:
    from ctxcli.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"keep_messages = 0 is invalid"):
        build_config({"stages": [{"use": "keep_last", "keep_messages": 0}]}, "ctx.toml")


def test_max_tokens_keeps_the_newest_part_that_fits_whole() -> None:
    conv = fixture("parallel.jsonl")
    whole = run("keep_last", conv, keep_messages=40)
    assert kept_keys(whole) == list(range(16))
    # A budget that the last user turn (11..15) fits and the turn before it does not.
    tail = run("keep_last", conv, keep_messages=40, max_tokens=10**6)
    assert kept_keys(tail) == list(range(16))  # everything fits: nothing dropped
    from ctxcli.services.tokens.by_name import get_counter
    from ctxcli.services.tokens.ledger import message_tokens

    counter = get_counter("approx")  # what run() counts with
    sizes = {m.key: message_tokens(counter, m) for m in conv.messages}
    budget = sum(sizes[k] for k in (0, *range(11, 16)))
    assert sum(sizes[k] for k in (0, *range(10, 16))) > budget
    cut = run("keep_last", conv, keep_messages=40, max_tokens=budget, start_on_user=True)
    assert kept_keys(cut) == [0, *range(11, 16)]
    assert any("keep_last" in note for note in cut.notes)
    # Too small for even the newest turn: that turn is kept whole, and a note says so.
    over = run("keep_last", conv, keep_messages=40, max_tokens=1, start_on_user=True)
    assert kept_keys(over) == [0, *range(11, 16)]
    assert any("over max_tokens 1" in note for note in over.notes)
