"""The referenced-term recall metric of benchmarks/recall.py (``make eval``, the recall floor)."""

from __future__ import annotations

from support.bench.recall import Case, measure, measure_case, names, terms

from ctxcli.core.model import Block, Conversation, Kind, Message


def count(text: str) -> int:
    return len(text.split())


def _conv(*messages: Message) -> Conversation:
    return Conversation(tuple(messages))


def _call(cid: str, args: str, text: str = "") -> Message:
    blocks = [Block(Kind.TOOL_CALL, args, call_id=cid, name="bash")]
    if text:
        blocks.insert(0, Block(Kind.TEXT, text))
    return Message("assistant", tuple(blocks))


def _result(cid: str, text: str) -> Message:
    return Message("tool", (Block(Kind.TOOL_RESULT, text, call_id=cid),))


def test_terms_are_identifiers_paths_and_numbers_of_four_chars() -> None:
    text = "see src/app.py line 1234 in load_config, fooBar v2x1 and os.path; the cat 12 abc"
    assert terms(text) == {"src/app.py", "1234", "load_config", "fooBar", "v2x1", "os.path"}
    assert terms("a plain sentence about nothing much at all") == set()
    assert names("Alice met Bob in Paris") == {"Alice", "Paris"}


def _session() -> Conversation:
    out = "error in src/app.py at line 4711: load_config failed, retry_count 9999 exceeded"
    return _conv(
        Message("user", (Block(Kind.TEXT, "fix it"),)),
        _call("c1", '{"cmd": "pytest"}'),
        _result("c1", out),
        _call("c2", '{"cmd": "ls"}'),
        _result("c2", "nothing here"),
        # the future: the agent uses two of the past's terms, and one term of its own
        _call("c3", '{"cmd": "sed -n 4711p src/app.py"}', "the bug is at 4711, new_term"),
        _result("c3", "load_config is mentioned only by a tool here"),
    )


def test_case_keeps_only_terms_the_agent_uses_later() -> None:
    case = Case.split("s", _session(), share=5 / 7)
    assert len(case.past.messages) == 5
    # load_config and retry_count are in the past's output but the agent never writes them;
    # new_term is the agent's but not in a past output.
    assert case.referenced == {"src/app.py", "4711"}


def test_untouched_past_has_full_recall_and_saves_nothing() -> None:
    case = Case.split("s", _session(), share=5 / 7)
    m = measure_case(case, case.past, count)
    assert (m.recall, m.tool_saved, m.context_saved, m.lost) == (1.0, 0.0, 0.0, frozenset())


def test_a_cleared_output_is_a_loss() -> None:
    case = Case.split("s", _session(), share=5 / 7)
    msgs = list(case.past.messages)
    msgs[2] = _result("c1", "[cleared]")
    m = measure_case(case, case.past.with_messages(msgs), count)
    assert m.recall == 0.0
    assert m.lost == {"src/app.py", "4711"}
    assert m.tool_saved > 0.5


def test_a_half_kept_output_loses_half() -> None:
    case = Case.split("s", _session(), share=5 / 7)
    msgs = list(case.past.messages)
    msgs[2] = _result("c1", "error in src/app.py: failed")
    m = measure_case(case, case.past.with_messages(msgs), count)
    assert (m.kept, m.referenced, m.recall, m.lost) == (1, 2, 0.5, frozenset({"4711"}))


def test_a_term_mangled_by_a_reducer_counts_as_lost() -> None:
    # "src/app.p" is not "src/app.py": a truncated term is not kept.
    case = Case.split("s", _session(), share=5 / 7)
    msgs = list(case.past.messages)
    msgs[2] = _result("c1", "error in src/app.p at line 471")
    assert measure_case(case, case.past.with_messages(msgs), count).recall == 0.0


def test_a_term_still_visible_elsewhere_in_the_past_is_kept() -> None:
    past = _conv(
        _call("c1", '{"cmd": "cat src/app.py"}'),
        _result("c1", "src/app.py: 4711 lines"),
    )
    cleared = past.with_messages([past.messages[0], _result("c1", "[cleared]")])
    m = measure(past, cleared, {"src/app.py", "4711"}, count)
    # the agent's own call still shows the path; the number is gone
    assert (m.kept, m.lost) == (1, frozenset({"4711"}))


def test_nothing_referenced_is_full_recall() -> None:
    past = _conv(_call("c1", "{}"), _result("c1", "hello world"))
    assert measure(past, past, set(), count).recall == 1.0
