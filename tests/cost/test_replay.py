"""Replay: the recorded requests rebuilt as data, priced through the cache model.

The last tests replay every shared session and hold the model to the issue's bar: the
replayed bill and its cache-read share within 10% of the recorded ones.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ctxcli.cost._jsonl import seconds
from ctxcli.cost.anchor import check_requests
from ctxcli.cost.blocks import content_block
from ctxcli.cost.cache import TTL, CachePolicy
from ctxcli.cost.prices import TokenUsage
from ctxcli.cost.replay import (
    Calibration,
    SessionReplay,
    build_requests,
    fit_calibration,
    price_requests,
    replay_session,
)
from ctxcli.cost.sequence import Block, BuildOptions, Request, RequestSequence, block_key
from support.cost_sessions import ClaudeSession, CodexRollout, Words, stamp, text, tool_use, usage
from support.paths import SHARED, need_shared


def texts(request: Request) -> list[str]:
    return [b.text for b in request.blocks if not b.hidden]


def test_each_response_is_one_request_with_the_chain_before_it(tmp_path: Path) -> None:
    s = ClaudeSession()
    s.user("run both", at=0)
    # v2.1.6 layout: T1, T2, then R1 (a side branch off T1) and R2, which the chain follows.
    t1, t2 = s.response("msg_1", [tool_use("t1", "ls"), tool_use("t2", "pwd")], at=2,
                        use=usage(write=2_000, out=40))  # fmt: skip
    s.result("t1", "a b c", at=3, parent=t1)
    s.result("t2", "/home", at=3.1, parent=t2)
    s.response("msg_2", [text("both ran")], at=5, use=usage(read=2_000, write=30, out=5))
    s.response("err", [text("API Error")], at=6, use=usage(inp=0, out=0), isApiErrorMessage=True)
    s.user("thanks", at=8)
    s.response("msg_3", [text("welcome")], at=9, use=usage(read=2_030, write=10, out=2))
    seq = build_requests(s.write(tmp_path / "s.jsonl"))
    assert (seq.format, seq.caching) == ("claude_code", "breakpoints")
    assert [r.key for r in seq.requests] == ["msg_1", "msg_2", "msg_3"]
    first, second, third = seq.requests
    assert texts(first) == ["run both"]
    calls = ['t1\nBash\n{"command":"ls"}', 't2\nBash\n{"command":"pwd"}']
    assert texts(second)[:3] == ["run both", *calls]
    assert texts(second)[3:] == ["t1\na b c", "t2\n/home"]  # the lost result is back, in order
    assert texts(third) == [*texts(second), "both ran", "thanks"]  # no API error note
    assert third.blocks[0].hidden
    assert third.breakpoints == ((0, "5m"), (len(third.blocks) - 1, "5m"))
    # Sent when its input was complete: the time of the record it answers.
    assert (first.at, third.at) == pytest.approx((_t(0), _t(8)))
    assert (third.output_tokens, third.recorded) == (2, TokenUsage(3, 2_030, 10, 0, 2))


def _t(at: float) -> float:
    value = seconds(stamp(at))
    assert value is not None
    return value


def test_compaction_restarts_the_chain_at_the_summary(tmp_path: Path) -> None:
    s = ClaudeSession()
    s.user("long work", at=0)
    s.response("m1", [text("worked")], at=1, use=usage(write=3_000))
    s.compact("summary of the work", at=100)
    s.user("go on", at=101)
    s.response("m2", [text("going")], at=102, use=usage(write=2_000))
    seq = build_requests(s.write(tmp_path / "s.jsonl"))
    assert texts(seq.requests[1]) == ["summary of the work", "go on"]


def test_a_malformed_parent_falls_back_to_the_record_before_it(tmp_path: Path) -> None:
    s = ClaudeSession()
    s.user("one", at=0)
    s.response("m1", [text("two")], at=1, use=usage(write=2_000))
    s.user("three", at=2)
    s.response("m2", [text("four")], at=3, use=usage(read=2_000, write=10))
    path = s.write(tmp_path / "s.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].replace('"content":', '"content" ')  # "three" is now unreadable
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (_, second) = build_requests(path).requests
    assert texts(second) == ["one", "two"]


def test_one_hour_breakpoints_when_the_client_wrote_one_hour_entries(tmp_path: Path) -> None:
    s = ClaudeSession()
    s.user("hi", at=0)
    s.response("m1", [text("yo")], at=1, use=usage(write=4_000, hour=4_000))
    path = s.write(tmp_path / "s.jsonl")
    assert build_requests(path).requests[0].breakpoints == ((0, "1h"), (1, "1h"))
    forced = build_requests(path, BuildOptions(ttl="5m", message_breakpoints=0))
    assert forced.requests[0].breakpoints == ((0, "5m"),)


def test_codex_requests_drop_old_reasoning_and_their_own_output(tmp_path: Path) -> None:
    r = CodexRollout()
    r.user("fix the bug", at=0)
    r.call(at=5, inp=3_000, cached=0, out=300, reasoning=200)
    r.item({"type": "reasoning", "summary": [], "encrypted_content": "gAAA1"}, at=5)
    r.item({"type": "function_call", "name": "shell", "arguments": '{"cmd":"ls"}',
            "call_id": "c1"}, at=5)  # fmt: skip
    r.item({"type": "ghost_snapshot", "ghost_commit": {"id": "x"}}, at=5)
    r.item({"type": "function_call_output", "call_id": "c1", "output": "a.py b.py"}, at=6)
    r.call(at=9, inp=3_400, cached=2_944, out=50, reasoning=0)
    r.item({"type": "message", "role": "assistant", "content": [{"type": "output_text",
            "text": "fixed"}]}, at=9)  # fmt: skip
    r.user("thanks", at=20)
    r.call(at=22, inp=3_500, cached=3_328, out=5)
    seq = build_requests(r.write(tmp_path / "rollout.jsonl"))
    assert (seq.format, seq.caching) == ("codex", "automatic")
    first, second, third = seq.requests
    assert texts(first) == ["fix the bug"]
    # The reasoning item is as large as the reasoning its call recorded.
    assert [b.tokens for b in second.blocks[1:]] == [None, 200, None, None]
    assert texts(second) == ["fix the bug", "", 'shell\n{"cmd":"ls"}', "a.py b.py"]
    # After a new user message the earlier reasoning is no longer sent.
    assert [b.tokens for b in third.blocks if b.tokens] == []
    assert texts(third)[-2:] == ["fixed", "thanks"]
    assert second.at == pytest.approx(_t(6))  # once the tool output was in


def test_calibration_recovers_overhead_and_ratio() -> None:
    requests = []
    for n in range(1, 6):
        blocks = (
            Block(b"h", hidden=True),
            *(Block(block_key(str(k)), "w " * 100) for k in range(n)),
        )
        recorded = TokenUsage(cache_read=5_000 + round(1.2 * 100 * n))
        requests.append(Request(str(n), float(n), "claude-sonnet-4-5", blocks, recorded=recorded))
    seq = RequestSequence("x", "claude_code", "breakpoints", tuple(requests))
    calibration = fit_calibration(seq, Words())
    assert calibration.overhead_tokens == 5_000
    assert calibration.token_ratio == pytest.approx(1.2)


def test_a_sequence_is_priced_through_the_cache() -> None:
    hidden = Block(b"client", hidden=True)
    early = [Block(block_key(f"m{k}"), "word " * 3_000) for k in range(3)]

    def request(n: int, blocks: list[Block], at: float) -> Request:
        body = (hidden, *blocks)
        marks: tuple[tuple[int, TTL], ...] = ((0, "5m"), (len(body) - 1, "5m"))
        return Request(str(n), at, "claude-sonnet-4-5", body, marks, output_tokens=10)

    recorded = RequestSequence("s", "claude_code", "breakpoints", (
        request(1, early[:2], 0), request(2, early, 60),
    ))  # fmt: skip
    calibration = Calibration(overhead_tokens=2_000, token_ratio=1.0)
    replay = price_requests(recorded, counter=Words(), calibration=calibration)
    one, two = replay.requests
    assert (one.usage.cache_write_5m, two.usage.cache_read, two.usage.cache_write_5m) == (
        8_000, 8_000, 3_000,
    )  # fmt: skip
    assert two.usd == pytest.approx((8_000 * 0.3 + 3_000 * 3.75 + 10 * 15) / 1e6)
    # The same requests with the first message changed, as a reducer might send them.
    shorter = replace(early[0], key=block_key("m0-short"), text="word " * 100)
    changed = replace(recorded, requests=(
        recorded.requests[0], replace(recorded.requests[1], blocks=(hidden, shorter, *early[1:])),
    ))  # fmt: skip
    other = price_requests(changed, counter=Words(), calibration=calibration)
    assert (other.requests[1].usage.cache_read, other.requests[1].usage.cache_write_5m) == (
        2_000, 6_100,
    )  # fmt: skip
    assert other.requests[1].bust
    assert other.busts == 1 and replay.busts == 0


def test_a_warm_client_prompt_is_read_on_the_first_request() -> None:
    hidden = Block(b"client", hidden=True)
    body = (hidden, Block(b"u", "hi there"))
    seq = RequestSequence("s", "claude_code", "breakpoints",
                          (Request("1", 0.0, "claude-sonnet-4-5", body, ((0, "5m"), (1, "5m"))),))  # fmt: skip
    calibration = Calibration(3_000, 1.0)
    cold = price_requests(seq, counter=Words(), calibration=calibration)
    warm = price_requests(seq, counter=Words(), calibration=calibration, warm_client_prompt=True)
    assert (cold.requests[0].usage.cache_read, warm.requests[0].usage.cache_read) == (0, 3_000)


def test_replay_of_a_small_session_reproduces_its_bill(tmp_path: Path) -> None:
    """A session whose recorded usage follows the model exactly replays to the cent."""
    s = ClaudeSession()
    s.user("hello " * 400, at=0)
    s.response("m1", [text("reply " * 100)], at=1, use=usage(inp=0, write=400 + 5_000, out=100))
    s.user("more " * 300, at=30)
    # The client's request after the turn wrote the reply too: m2 reads it.
    s.response("m2", [text("ok")], at=31, use=usage(inp=0, read=5_500, write=300, out=1))
    s.user("late " * 200, at=30 + 400)  # after the 5-minute TTL
    s.response("m3", [text("ok")], at=431, use=usage(inp=0, write=6_001, out=1))
    session = replay_session(s.write(tmp_path / "s.jsonl"), counter=Words())
    assert session.replay.calibration == Calibration(5_000, 1.0)
    assert [r.bust for r in session.replay.requests] == [False, False, True]
    assert session.replayed_usd == pytest.approx(session.recorded_usd)
    assert session.error == pytest.approx(0, abs=1e-9)
    assert session.read_share_error == pytest.approx(0, abs=1e-9)


def test_cache_policy_can_be_given(tmp_path: Path) -> None:
    r = CodexRollout()
    r.user("hi " * 2_000, at=0)
    r.call(at=1, inp=2_003, cached=0, out=1)
    r.user("again", at=2)
    r.call(at=3, inp=2_010, cached=1_920, out=1)
    path = r.write(tmp_path / "rollout.jsonl")
    default = replay_session(path, counter=Words())
    assert default.replay.requests[1].usage.cache_read == 1_920
    never = replay_session(
        path, counter=Words(), policy=CachePolicy(automatic=True, min_tokens=10**9)
    )
    assert never.replay.requests[1].usage.cache_read == 0


# --- the shared sessions: the model against the recorded bills --------------------------------


def _with_usage() -> list[str]:
    """The shared Claude Code sessions and Codex rollouts that record usage."""
    if not SHARED.is_dir():
        return ["(absent)"]
    return [
        p.name
        for p in sorted(SHARED.glob("*.jsonl"))
        if p.name.startswith(("cc_", "codex_"))
        and any(k in p.read_text(encoding="utf-8") for k in ('"usage"', '"token_count"'))
    ]


# --- turn starts: the thinking the API strips, the client's request after a turn -----------

TURN_CALIBRATION = Calibration(overhead_tokens=5_000, token_ratio=1.0)


def thinking(s: str) -> dict[str, object]:
    return {"type": "thinking", "thinking": s, "signature": "sig"}


def _turn(s: ClaudeSession, end: str = "text") -> None:
    """A task, a tool round with thinking, and an answer (or a tool call cut off)."""
    s.user("task " * 400, at=0)
    s.response("m1", [thinking("think " * 300), tool_use("t1", "ls")], at=2, use=usage(write=5_700))
    s.result("t1", "a.py " * 100, at=3)
    last = text("done") if end == "text" else tool_use("t2", "cat a.py")
    s.response("m2", [thinking("more " * 200), last], at=5, use=usage(read=5_700, write=400))


def _third(s: ClaudeSession, path: Path, extra: tuple[str, ...] = ()) -> Request:
    s.response("m3", [text("ok")], at=61, use=usage(read=5_000, write=600))
    sequence = build_requests(s.write(path, extra))
    return sequence.requests[2]


def _priced_third(s: ClaudeSession, path: Path, extra: tuple[str, ...] = ()) -> TokenUsage:
    _third(s, path, extra)
    sequence = build_requests(path)
    replay = price_requests(sequence, counter=Words(), calibration=TURN_CALIBRATION)
    return replay.requests[2].usage


def test_the_thinking_of_earlier_turns_is_not_sent(tmp_path: Path) -> None:
    """A new turn's request carries no thinking of the turns before it (the API strips it);
    the current turn's thinking stays (its tool loop needs it)."""
    s = ClaudeSession()
    _turn(s)
    s.user("next", at=60)
    third = _third(s, tmp_path / "s.jsonl")
    texts = " ".join(b.text for b in third.blocks)
    assert "think" not in texts and "more" not in texts
    second = build_requests(tmp_path / "s.jsonl").requests[1]
    assert "think" in " ".join(b.text for b in second.blocks)  # within the turn: kept
    used = _priced_third(s, tmp_path / "s.jsonl")
    # client prompt 5,000 + task 400 + t1 ls 3 + result 101 + done 1 + next 1: no thinking.
    assert used.input_total == 5_506


def test_a_turn_start_reads_the_turn_the_clients_post_turn_request_wrote(tmp_path: Path) -> None:
    """After a completed turn the client's unlogged request wrote the conversation (its
    thinking stripped): the next turn reads all of it and writes only its new message."""
    s = ClaudeSession()
    _turn(s)
    s.user("next", at=60)
    used = _priced_third(s, tmp_path / "s.jsonl")
    assert (used.cache_read, used.cache_write) == (5_505, 1)


def test_a_queued_message_finds_only_the_turns_first_entry(tmp_path: Path) -> None:
    """A message queued while the model worked (a task notification) is sent the moment the
    turn ends, before any post-turn request: the prefix changes at the stripped thinking,
    and only the turn's first request's entry (client prompt and task) is read."""
    s = ClaudeSession()
    _turn(s)
    note = "<task-notification>done</task-notification>"
    s.user(note, at=5.6)
    queued = json.dumps({"type": "queue-operation", "operation": "enqueue", "content": note})
    used = _priced_third(s, tmp_path / "s.jsonl", (queued,))
    assert used.cache_read == 5_400


def test_a_turn_cut_off_in_a_tool_call_has_no_post_turn_request(tmp_path: Path) -> None:
    s = ClaudeSession()
    _turn(s, end="tool_use")
    s.user("[Request interrupted by user for tool use]", at=60)
    used = _priced_third(s, tmp_path / "s.jsonl")
    assert used.cache_read == 5_400


SESSIONS = _with_usage()
# Why a session misses the bar (measured; see benchmarks/bench_cost.py for the table).
ONE_REQUEST = (
    "one request, cold: 20,864 of its 22,539 input tokens were read from a cache the "
    "user's other sessions wrote before this one began; a replay of the file cannot know it"
)
BILL_MISSES = {"codex_agent-history_real_session-01_v0.135.jsonl": ONE_REQUEST}
SHARE_MISSES = BILL_MISSES
_REPLAYS: dict[str, SessionReplay] = {}


def _replay(name: str) -> SessionReplay:
    path = need_shared() / name
    if name not in _REPLAYS:
        _REPLAYS[name] = replay_session(path)
    return _REPLAYS[name]


def _cases(misses: dict[str, str]) -> list[object]:
    return [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=misses[n]))
        if n in misses
        else n
        for n in SESSIONS
    ]


@pytest.mark.parametrize("name", _cases(BILL_MISSES))
def test_replayed_bill_within_ten_percent_of_the_recorded(name: str) -> None:
    session = _replay(name)
    assert len(session.replay.requests) == len(session.recorded.requests)
    assert abs(session.error) <= 0.10, f"{session.error:+.1%}"


@pytest.mark.parametrize("name", _cases(SHARE_MISSES))
def test_cache_read_share_within_ten_percent_of_the_recorded(name: str) -> None:
    session = _replay(name)
    points = session.replayed_read_share - session.recorded_read_share
    assert abs(session.read_share_error) <= 0.10, f"{session.read_share_error:+.1%}"
    assert abs(points) <= 0.10, f"{points:+.1%} points"


def test_a_tool_call_and_its_result_count_their_id() -> None:
    """The id of a tool call is sent twice (the call, the result): the model reads it."""
    call = {"type": "tool_use", "id": "toolu_01ABC", "name": "Bash", "input": {"command": "ls"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_01ABC", "content": "a.py"}
    assert "toolu_01ABC" in content_block("assistant", call).text
    assert "toolu_01ABC" in content_block("user", result).text


@pytest.mark.real_data
def test_the_mclaude_token_counts_fit_each_request() -> None:
    """With the ids counted and earlier turns' thinking left out, one hidden prompt and one
    ratio fit every request's recorded input size within 3% (p90; 7.3% without the ids)."""
    session = _replay("cc_mclaude_c76e5be5.jsonl")
    checks = check_requests(session.recorded.requests, session.replay)
    assert checks.distribution("input")["p90"] < 0.03
    assert session.replay.calibration.token_ratio < 1.25


def _replayed_at_line(name: str, line: int) -> tuple[TokenUsage, TokenUsage]:
    """The recorded and the replayed usage of the call whose first record is ``line``."""
    session = _replay(name)
    rec = next(r for r in session.recorded.requests if r.line == line)
    replayed = next(r for r in session.replay.requests if r.key == rec.key)
    return rec.usage, replayed.usage


@pytest.mark.real_data
@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("cc_mclaude_c76e5be5.jsonl", 191),  # 16:33:39, after an interrupted turn
        ("cc_mclaude_c76e5be5.jsonl", 376),  # 16:48:52, a queued task notification
        ("cc_spotter_4d5611e5.jsonl", 1503),  # 21:03:30, a queued task notification
    ],
)
def test_turn_starts_without_a_post_turn_request_read_only_the_client_prompt(
    name: str, line: int
) -> None:
    """The long turn before them, its thinking stripped, lies beyond the 20-block
    lookback: they read the client's prompt and rewrite the conversation, as recorded
    (the replay rewrote under 650 tokens of each before)."""
    for used in _replayed_at_line(name, line):  # recorded, replayed
        assert used.cache_write > 0.3 * used.input_total


@pytest.mark.real_data
def test_a_turn_start_after_a_completed_turn_reads_it_all() -> None:
    """cc_mclaude_c76e5be5 line 488 reads 71,628 of its 71,648 tokens, a prompt shorter
    than the request before it: only the client's post-turn request could have written it."""
    recorded, replayed = _replayed_at_line("cc_mclaude_c76e5be5.jsonl", 488)
    assert recorded.cache_write + recorded.input < 50
    assert replayed.cache_write + replayed.input < 0.02 * replayed.input_total
