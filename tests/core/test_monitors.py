"""The six stuck-agent monitors, one by one, and steps built from real formats."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.core.monitors import (
    MONITORS,
    Step,
    conversation_monitors,
    diversity,
    edit_of,
    edit_revert,
    edit_revert_events,
    failure_signature,
    hedge,
    looks_stuck,
    monitor_scores,
    monitor_series,
    no_progress,
    steps_of,
    streak,
    tool_key,
)
from ctxcli.core.monitors import (
    test_repeat as repeat_score,  # aliased: pytest would collect test_*
)
from ctxcli.formats import load
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import StageContext, TokenLedger
from ctxcli.stages.nudge_early_exit import NudgeEarlyExitOptions, nudge_early_exit
from ctxcli.store.naming import Preview
from support.cli import invoke
from support.paths import SHARED, corpus, shared_transcripts


def step(action: str = "bash", args: Any = None, **kw: Any) -> Step:
    return Step(action, {"command": "ls"} if args is None else args, **kw)


# -- streak ---------------------------------------------------------------------------


def test_streak_counts_identical_trailing_actions() -> None:
    same = step("grep", {"pattern": "foo", "path": "src"})
    assert streak([same]) == 0.0  # one action is no repetition
    assert streak([step("ls"), same, same]) == pytest.approx(0.4)
    assert streak([same] * 4) == pytest.approx(0.8)
    assert streak([same] * 9) == 1.0


def test_streak_needs_same_arguments_not_just_same_tool() -> None:
    calls = [step("bash", {"command": f"sed -n {i},+10p f.py"}) for i in range(6)]
    assert streak(calls) == 0.0


def test_streak_ignores_key_order_of_dict_arguments() -> None:
    a = step("Read", {"file_path": "a.py", "offset": 1})
    b = step("Read", {"offset": 1, "file_path": "a.py"})
    assert streak([a, b, a, b]) == pytest.approx(0.8)


# -- no_progress ----------------------------------------------------------------------


def test_no_progress_counts_repeats_that_got_the_same_result_not_calls() -> None:
    # Issue 35 §3: call_count (calls / 20) read 1.00 on every finished session.
    assert no_progress([step("bash", {"command": f"ls {i}"}) for i in range(50)]) == 0.0
    same = step("grep", {"pattern": "bug"}, observation="no matches")
    assert no_progress([same] * 3) == pytest.approx(0.4)  # two repeats
    assert no_progress([same] * 12) == 1.0
    # The same call that learns something new each time is progress (a log that grows).
    tail = [step("bash", {"command": "tail log"}, observation=f"line {i}") for i in range(12)]
    assert no_progress(tail) == 0.0


def test_no_progress_looks_at_the_last_ten_calls() -> None:
    same = step("grep", {"pattern": "bug"}, observation="no matches")
    fresh = [step("bash", {"command": f"ls {i}"}) for i in range(10)]
    assert no_progress([same] * 12 + fresh) == 0.0


def test_the_series_ends_with_the_scores_of_the_whole_session() -> None:
    same = step("grep", {"pattern": "bug"}, observation="no matches")
    steps = [step("bash", {"command": f"ls {i}"}) for i in range(7)] + [same] * 6
    assert monitor_series(steps)[-1] == (13, monitor_scores(steps))


# -- edit_revert ----------------------------------------------------------------------


def test_edit_revert_reads_dict_arguments() -> None:
    # Claude Code's Edit: the arguments are an object, not a string (ReasonBlocks read
    # only string arguments and scored 0 here).
    forward = step("Edit", {"file_path": "/r/a.py", "old_string": "x = 1", "new_string": "x = 2"})
    back = step("Edit", {"file_path": "/r/a.py", "old_string": "x = 2", "new_string": "x = 1"})
    assert edit_revert_events([forward, step(), back]) == (1, 0)
    assert edit_revert([forward, back]) == 0.5
    assert edit_revert([forward, back, forward, back]) == 1.0


def test_edit_revert_parses_json_text_arguments() -> None:
    args = json.dumps({"command": "str_replace", "path": "a.py", "old_str": "a", "new_str": "b"})
    undo = json.dumps({"command": "str_replace", "path": "a.py", "old_str": "b", "new_str": "a"})
    assert edit_revert_events(
        [step("str_replace_editor", args), step("str_replace_editor", undo)]
    ) == (1, 0)


def test_edit_revert_other_file_is_no_revert() -> None:
    a = step("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"})
    b = step("Edit", {"file_path": "b.py", "old_string": "y", "new_string": "x"})
    assert edit_revert([a, b]) == 0.0


def test_write_back_to_an_earlier_content_is_a_revert() -> None:
    def write(text: str) -> Step:
        return step("Write", {"file_path": "a.py", "content": text})

    assert edit_revert_events([write("A"), write("B")]) == (0, 0)
    assert edit_revert_events([write("A"), write("B"), write("A")]) == (1, 0)
    assert edit_revert_events([write("A"), write("A")]) == (0, 0)  # rewriting is no revert


def test_edit_error_edit_on_the_same_path() -> None:
    failed = step(
        "Edit",
        {"file_path": "a.py", "old_string": "nope", "new_string": "y"},
        observation="String to replace not found in file.",
        is_error=True,
    )
    retry = step("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"})
    assert edit_revert_events([failed, retry]) == (0, 1)
    # edit, then a failing test run, then the same file again
    ok = step("Edit", {"file_path": "a.py", "old_string": "1", "new_string": "2"})
    test = step("bash", {"command": "pytest"}, observation="FAILED t.py::x", is_error=True)
    assert edit_revert_events([ok, test, retry]) == (0, 1)
    assert edit_revert([ok, test, retry]) == 0.25


def test_viewing_is_not_editing() -> None:
    view = step("str_replace_editor", {"command": "view", "path": "a.py"})
    assert edit_of(view) is None
    assert edit_of(step("bash", {"command": "cat a.py"})) is None


def test_multi_edit_pairs_are_read() -> None:
    multi = step(
        "MultiEdit",
        {"file_path": "a.py", "edits": [{"old_string": "a", "new_string": "b"}]},
    )
    edit = edit_of(multi)
    assert edit is not None and edit.pairs == (("a", "b"),)


# -- test_repeat ----------------------------------------------------------------------


def _failing(message: str) -> Step:
    return step(
        "bash",
        {"command": "pytest -x"},
        observation=f"collected 3 items\n\nFAILED tests/t.py::test_a\n{message}",
        is_error=True,
    )


def test_same_failure_repeats_after_normalisation() -> None:
    runs = [_failing(f"AssertionError: 0x{7 + i}f != {i}.5 at line {10 * i}") for i in range(3)]
    signatures = {failure_signature(s) for s in runs}
    assert len(signatures) == 1
    assert repeat_score(runs[:1]) == 0.0
    assert repeat_score(runs[:2]) == pytest.approx(1 / 3)
    assert repeat_score(runs * 2) == 1.0


def test_different_failures_do_not_repeat() -> None:
    runs = [_failing("KeyError: 'a'"), _failing("TypeError: bad operand")]
    assert repeat_score(runs) == 0.0


def test_a_listing_that_mentions_errors_is_no_failure() -> None:
    listing = step(
        "Read", {"file_path": "e.py"}, observation="class ParseError(ValueError):\n    pass\n"
    )
    assert failure_signature(listing) is None
    assert repeat_score([listing] * 5) == 0.0


def test_generic_exit_code_lines_are_not_signatures() -> None:
    a = step("Bash", observation="Exit code 1\nls: cannot access 'x': No such file", is_error=True)
    b = step("Bash", observation="Exit code 1\nmake: *** [all] Error 2", is_error=True)
    assert failure_signature(a) != failure_signature(b)


# -- diversity ------------------------------------------------------------------------


def test_diversity_needs_eight_actions() -> None:
    assert diversity([step("grep")] * 7) == 0.0
    assert diversity([step("grep")] * 8) == 1.0


def test_diversity_scores_distinct_tools_of_the_last_five() -> None:
    head = [step(f"t{i}") for i in range(5)]
    assert diversity(head + [step("a"), step("b")] * 3) == 0.75  # two tools: stuck-ish
    assert diversity(head + [step(n) for n in "abcab"]) == 0.5  # three tools: not > 0.5
    assert diversity(head + [step(n) for n in "abcde"]) == 0.0


def test_shell_tools_are_told_apart_by_program() -> None:
    assert tool_key(step("bash", {"command": "cd /repo && grep -rn foo ."})) == "bash:grep"
    varied = [
        step("bash", {"command": c})
        for c in ("ls", "cat a", "grep x", "sed -n 1p a", "python t.py")
    ]
    assert diversity([step("bash")] * 3 + varied) == 0.0


# -- hedge ----------------------------------------------------------------------------


def _thoughts(texts: list[str]) -> list[Step]:
    return [step(thought=t) for t in texts]


def test_retractions_in_the_late_half_raise_hedge() -> None:
    early = ["Reading the parser to find where tokens are split."] * 6
    late = [
        "That didn't work, same error as before.",
        "Let me revert that change and try a different approach.",
        "Still failing. I'm going in circles here.",
        "Listing files.",
        "My mistake, the path was wrong.",
        "Running tests.",
    ]
    assert hedge(_thoughts(early + early)) == 0.0
    assert hedge(_thoughts(early + late)) == 1.0
    # the same retractions early on, then confident work: no late signal
    assert hedge(_thoughts(late + early)) == 0.0


def test_rising_hedging_raises_hedge() -> None:
    sure = "The function parses the header and returns the offset of the first record."
    unsure = "Maybe the offset is wrong, perhaps it seems off, I think it might possibly fail."
    assert hedge(_thoughts([sure] * 8 + [sure] * 8)) == 0.0
    assert hedge(_thoughts([sure] * 8 + [unsure] * 8)) == 1.0
    assert hedge(_thoughts([unsure] * 8 + [sure] * 8)) == 0.0  # falling, not rising


def test_all_scores_are_between_zero_and_one() -> None:
    steps = [_failing("boom")] * 30
    scores = monitor_scores(steps)
    assert list(scores) == list(MONITORS)
    assert all(0.0 <= v <= 1.0 for v in scores.values())


# -- steps from conversations ------------------------------------------------------------


def _call(call_id: str, name: str, args: dict[str, Any], text: str = "") -> Message:
    blocks = [Block(Kind.TEXT, text)] if text else []
    blocks.append(Block(Kind.TOOL_CALL, json.dumps(args), call_id, name))
    return Message("assistant", tuple(blocks))


def _result(call_id: str, text: str, is_error: bool = False) -> Message:
    return Message("tool", (Block(Kind.TOOL_RESULT, text, call_id, is_error=is_error),))


def test_steps_of_links_calls_results_and_thoughts() -> None:
    conv = Conversation(
        (
            Message("user", (Block(Kind.TEXT, "fix it"),)),
            Message("assistant", (Block(Kind.TEXT, "Let me look first."),)),
            _call("c1", "Read", {"file_path": "a.py"}, "Reading a.py."),
            _result("c1", "x = 1"),
            _call("c2", "Edit", {"file_path": "a.py", "old_string": "1", "new_string": "2"}),
            _result("c2", "Error: file changed on disk", is_error=True),
        )
    )
    steps = steps_of(conv)
    assert [s.action for s in steps] == ["Read", "Edit"]
    assert steps[0].arguments == {"file_path": "a.py"}
    assert steps[0].thought == "Let me look first.\nReading a.py."
    assert steps[0].observation == "x = 1" and not steps[0].is_error
    assert steps[1].is_error


def test_unflagged_error_text_counts_as_error() -> None:
    conv = Conversation(
        (
            _call("c", "bash", {"command": "x"}),
            _result("c", "Traceback (most recent call last):\n  ..."),
        )
    )
    assert steps_of(conv)[0].is_error


@pytest.mark.real_data
def test_claude_code_transcript_has_a_revert_read_from_dict_arguments() -> None:
    raw = (SHARED / "cc_spotter_4d5611e5.jsonl").read_bytes()
    conv = load(raw, "cc_spotter").conversation
    steps = steps_of(conv)
    assert len(steps) == 150
    assert any(isinstance(s.arguments, dict) and "file_path" in s.arguments for s in steps)
    reverts, _cycles = edit_revert_events(steps)
    assert reverts >= 1
    assert conversation_monitors(conv)["edit_revert"] > 0


# -- ctx stats --------------------------------------------------------------------------


def _looping_transcript(calls: int = 6) -> str:
    lines = [{"role": "user", "content": "find the bug"}]
    for i in range(calls):
        lines.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "grep", "arguments": '{"pattern": "bug"}'},
                    }
                ],
            }
        )
        lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": "no matches"})
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_stats_shows_monitors_without_the_stage(tmp_path: Any) -> None:
    src = tmp_path / "t.jsonl"
    src.write_text(_looping_transcript())
    result = invoke(["stats", str(src), "--json"])
    monitors = json.loads(result.stdout)["files"][0]["monitors"]  # one shape (issue 35 §3)
    assert list(monitors) == list(MONITORS)
    assert monitors["streak"] == 1.0
    assert monitors["no_progress"] == 1.0  # five calls repeat the first, same result
    table = invoke(["stats", str(src)])
    assert table.stdout == ""
    assert "streak" in table.stderr and "1.00" in table.stderr and "hedge" in table.stderr


def test_a_looping_agent_looks_stuck_where_the_nudge_fires(tmp_path: Any) -> None:
    src = tmp_path / "t.jsonl"
    src.write_text(_looping_transcript(45))
    err = invoke(["stats", str(src)]).stderr
    assert "agent monitors: looks stuck" in err
    assert "1 = looks stuck" not in err  # a score at 1 is a measure, not a verdict
    assert "of the last 10 calls, repeats with the same result" in err
    conv = load(src.read_bytes(), "t").conversation
    assert looks_stuck(monitor_scores(steps_of(conv)))
    ctx = StageContext(TokenLedger(get_counter("approx")), Preview("off"))
    assert nudge_early_exit(conv, NudgeEarlyExitOptions(), ctx).counters["nudges"] == 1


@pytest.mark.parametrize(
    "path",
    corpus(
        [p for p in shared_transcripts() if p.suffix in (".jsonl", ".json", ".traj")],
        "an agent session",
    ),
)
def test_no_finished_shared_session_looks_stuck(path: Any) -> None:
    """Issue 35 §3: every real session tried read "looks stuck", finished ones included."""
    steps = steps_of(load(path.read_bytes(), path.name).conversation)
    assert not looks_stuck(monitor_scores(steps)), path.name
    err = invoke(["stats", str(path)]).stderr
    assert "agent monitors" not in err and "looks stuck" not in err
