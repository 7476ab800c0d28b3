"""clear_tool_results: rounds of tool use, clear_at_least_tokens, Anthropic's names, short hints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxcli.api import reduce_bytes, reduce_file, restore_file
from ctxcli.core.hints import clear_hint, is_cleared, is_ctx_marked, is_truncated
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.formats import load
from ctxcli.pipeline.config import build_config
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import StageContext, TokenLedger, get_stage
from ctxcli.stages._naming import result_key
from ctxcli.stages.base import StageResult
from ctxcli.store.naming import Preview
from support.paths import CASES, SHARED, need_shared
from support.stage_helpers import run

BIG = "weather data for the coast " * 20
SUBAGENT = SHARED / "cc_spotter_4d5611e5_subagent_a2898e3.jsonl"
SWE = SHARED / "sweagent_marshmallow-1867_fc.traj"


def _weather() -> Conversation:
    """The issue's example: two tool rounds, then a plain answer."""
    return Conversation(
        (
            Message("user", (Block(Kind.TEXT, "Weather in Paris?"),)),
            Message("assistant", (Block(Kind.TOOL_CALL, '{"q": 1}', "c1", "get"),)),
            Message("tool", (Block(Kind.TOOL_RESULT, BIG, "c1"),)),
            Message("assistant", (Block(Kind.TOOL_CALL, '{"q": 2}', "c2", "get"),)),
            Message("tool", (Block(Kind.TOOL_RESULT, BIG, "c2"),)),
            Message("assistant", (Block(Kind.TEXT, "It is sunny"),)),
        )
    )


def _results(conv: Conversation) -> list[str]:
    return [b.text for _ref, b in conv.iter_blocks(Kind.TOOL_RESULT)]


def _real(path: Path) -> Conversation:
    need_shared()
    return load(path.read_bytes(), str(path)).conversation


def _cl100k(stage: str, conv: Conversation, **options: object) -> StageResult:
    spec = get_stage(stage)
    ctx = StageContext(TokenLedger(get_counter("cl100k")), Preview("ctx-offload"))
    return spec.fn(conv, spec.options(**options), ctx)


def test_a_closing_answer_is_not_a_round() -> None:
    out = run("clear_tool_results", _weather(), max_tokens=20, keep_rounds=1).conversation
    first, second = _results(out)
    assert is_cleared(first)
    assert second == BIG  # the newest result stays although an answer follows it


def test_tool_rounds_skip_responses_without_calls() -> None:
    conv = _weather()
    assert len(conv.rounds()) == 3
    assert [r.assistant for r in conv.tool_rounds()] == [(1,), (3,)]


def test_real_session_ending_in_an_answer_keeps_its_last_results() -> None:
    conv = _real(SUBAGENT)
    assert conv.messages[-1].role == "assistant" and not conv.messages[-1].tool_calls
    last_round = conv.tool_rounds()[-1]
    out = run("clear_tool_results", conv, max_tokens=0, keep_rounds=1).conversation
    for mi in last_round.results:
        assert out.messages[mi] == conv.messages[mi]
    assert sum(map(is_cleared, _results(out))) > 10


def test_strip_tool_calls_keeps_the_last_round_of_tool_use() -> None:
    out = run("strip_tool_calls", _weather(), keep_last_rounds=1).conversation
    assert _results(out) == [BIG]
    assert [b.call_id for m in out for b in m.tool_calls] == ["c2"]


def test_keep_results_counts_tool_results() -> None:
    out = run("clear_tool_results", _weather(), max_tokens=0, keep_rounds=0, keep_results=1)
    assert [is_cleared(t) for t in _results(out.conversation)] == [True, False]
    none = run("clear_tool_results", _weather(), max_tokens=0, keep_rounds=0, keep_results=2)
    assert none.conversation is _weather() or _results(none.conversation) == [BIG, BIG]


def test_clear_at_least_skips_a_small_gain() -> None:
    small = run("clear_tool_results", _weather(), max_tokens=0, clear_at_least_tokens=10_000)
    assert _results(small.conversation) == [BIG, BIG]
    assert "clear_at_least_tokens 10000" in small.notes[0]
    enough = run("clear_tool_results", _weather(), max_tokens=0, clear_at_least_tokens=50)
    assert enough.counters["cleared"] == 1
    assert enough.counters["tokens_reclaimed"] >= 50


def test_anthropic_names_are_accepted() -> None:
    conv = Conversation(
        (
            Message("user", (Block(Kind.TEXT, "go"),)),
            Message(
                "assistant",
                (
                    Block(Kind.TOOL_CALL, '{"path": "' + "x" * 100 + '"}', "a", "read"),
                    Block(Kind.TOOL_CALL, '{"cmd": "ls"}', "b", "bash"),
                ),
            ),
            Message("tool", (Block(Kind.TOOL_RESULT, BIG, "a"),)),
            Message("tool", (Block(Kind.TOOL_RESULT, BIG, "b"),)),
            Message("assistant", (Block(Kind.TOOL_CALL, "{}", "c", "bash"),)),
            Message("tool", (Block(Kind.TOOL_RESULT, "ok", "c"),)),
        )
    )
    options = {"max_tokens": 0, "clear_tool_inputs": True, "exclude_tools": ["bash"]}
    out = run("clear_tool_results", conv, **options)
    assert (out.counters["cleared"], out.counters["arguments_cleared"]) == (1, 1)
    assert _results(out.conversation)[1] == BIG  # bash is excluded
    assert "ctx_cleared" in out.conversation.messages[1].blocks[0].text


def test_short_hint_is_small_and_names_a_file() -> None:
    conv = _real(SWE)
    out = _cl100k("clear_tool_results", conv, max_tokens=0).conversation
    count = get_counter("cl100k").count
    hints = [t for t in _results(out) if is_cleared(t)]
    assert len(hints) >= 10
    assert all(t.startswith("[ctx cleared: ctx-offload/clear/") for t in hints)
    # Beyond the path it cites (Eino's call id, ~25 tokens here) the hint costs 5 tokens.
    assert all(count(t) <= count(_cited(t)) + 5 for t in hints)
    per_hint = sum(map(count, hints)) / len(hints)
    long = _cl100k("clear_tool_results", conv, max_tokens=0, hint="long").conversation
    long_hints = [t for t in _results(long) if is_cleared(t)]
    assert sum(map(count, long_hints)) / len(long_hints) >= per_hint + 7


def test_long_hints_of_the_previous_version_rerun_unchanged() -> None:
    old = clear_hint("en", path="ctx-offload/clear/call_1")
    assert is_cleared(old) and is_ctx_marked(old)
    assert is_cleared(clear_hint("zh", path="x/clear/1", form="short"))
    assert is_cleared(clear_hint("en", path="x/clear/1", form="marker"))
    assert not is_cleared("[ctx cleared: x\ny]") and not is_cleared("[ctx cleared] and more")
    stage = {"use": "clear_tool_results", "max_tokens": 0}
    long = build_config({"tokenizer": "approx", "stages": [{**stage, "hint": "long"}]}, "t")
    short = build_config({"tokenizer": "approx", "stages": [stage]}, "t")
    raw = CASES / "clear_tool_results" / "basic" / "input.jsonl"
    reduced = reduce_bytes(raw.read_bytes(), config=long).output
    assert b"old tool result cleared" in reduced
    assert reduce_bytes(reduced, config=short).output == reduced


@pytest.mark.parametrize(
    ("preset", "name"),
    [
        ("swe-agent", "sweagent_marshmallow-1867_fc.traj"),
        ("mini-swe-agent", "minisweagent_sqlfluff-1733_deepseek-chat.traj.json"),
    ],
)
def test_observation_masking_presets(
    preset: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Complexity Trap: the last 10 observations verbatim, each older one a one-line
    # placeholder naming the file that holds it; no token trigger.
    src = SHARED / name
    conv = _real(src)
    monkeypatch.chdir(tmp_path)
    config = build_config({"preset": preset}, "t")
    report, out = reduce_file(src, "out", config=config, offload_dir="off")
    reduced = load(out, name).conversation
    before, after = _results(conv), _results(reduced)
    assert len(after) == len(before) > 10
    assert after[-10:] == before[-10:]
    cleared = [(t, b) for t, b in zip(after[:-10], before, strict=False) if t != b]
    kept = [t for t, b in zip(after[:-10], before, strict=False) if t == b]
    assert all(is_cleared(t) and "\n" not in t for t, _ in cleared)
    # Hints cite the offload file by its absolute path (about 30 tokens here): a result
    # shorter than its hint is left whole, and on this trajectory that is 61 of 146.
    assert len(cleared) > len(kept)
    assert all(len(t) < 200 for t in kept)  # left alone: not longer than its hint
    for hint, original in cleared:
        path = Path(hint.removeprefix("[ctx cleared: ").removesuffix("]"))
        assert path.read_bytes().decode("utf-8") == original
    assert restore_file("out", offload_dir="off") == src.read_bytes()
    assert report.tokens_after < report.tokens_before


def _cited(text: str) -> str:
    return text.removeprefix("[ctx cleared: ").removesuffix("]")


@pytest.mark.parametrize("form", ["short", "long"])
def test_every_hint_form_names_the_file_after_the_call_id(form: str) -> None:
    # Eino: {root}/clear/{tool_call_id}, whatever the hint's length.
    out = run("clear_tool_results", _weather(), max_tokens=20, hint=form).conversation
    first, _second = _results(out)
    assert first.endswith("off/clear/c1]")
    assert first == clear_hint("en", path="off/clear/c1", form=form)


def test_real_hints_cite_their_call_ids() -> None:
    conv = _real(SWE)
    refs = list(conv.iter_blocks(Kind.TOOL_RESULT))
    keys = [result_key(ref, b) for ref, b in refs]
    out = _cl100k("clear_tool_results", conv, max_tokens=0).conversation
    cited = [
        (key, _cited(text))
        for key, text in zip(keys, _results(out), strict=True)
        if is_cleared(text)
    ]
    assert len(cited) >= 10
    # Named by the tail of the call id (an id of 29 characters by its last 8)...
    assert all(len(key) <= 12 for key in keys)
    ids = [b.call_id or "" for _ref, b in refs]
    assert all(k == (i[-8:] if len(i) > 12 else i) for i, k in zip(ids, keys, strict=True))
    assert sum(len(i) > 12 for i in ids) >= 10
    # ... and a name taken by another text (the file reuses two ids, and its made-up
    # ids share tails) gets the naming policy's suffix.
    shared = {key for key in keys if keys.count(key) > 1}
    assert len(shared) >= 2
    again = [(k, p) for k, p in cited if p != f"ctx-offload/clear/{k}"]
    assert again and {k for k, _ in again} <= shared
    assert all(re.fullmatch(rf"ctx-offload/clear/{k}-[0-9a-f]{{10}}", p) for k, p in again)


def test_a_reused_call_id_gets_a_file_of_its_own(tmp_path: Path) -> None:
    # Real transcripts reuse ids: the second result keeps its own text, under the
    # naming policy's suffixed name, and both are restored.
    conv = _weather()
    messages = list(conv.messages)
    messages[3] = Message("assistant", (Block(Kind.TOOL_CALL, '{"q": 2}', "c1", "get"),))
    messages[4] = Message("tool", (Block(Kind.TOOL_RESULT, BIG + "second", "c1"),))
    out = run(
        "clear_tool_results",
        Conversation(tuple(messages)),
        max_tokens=0,
        keep_rounds=0,
    ).conversation
    first, second = (_cited(t) for t in _results(out))
    assert first == "off/clear/c1"
    assert second.startswith("off/clear/c1-") and second != first


def test_a_truncated_result_cleared_later_cites_its_full_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One read gets the original back: the hint cites truncation's file, and the
    # truncated preview is not offloaded a second time.
    conv = _real(SWE)
    monkeypatch.chdir(tmp_path)
    stages = [
        {"use": "truncate_tool_output", "max_chars": 2000},
        {"use": "clear_tool_results", "max_tokens": 0},
    ]
    report, out = reduce_file(
        SWE, "out", config=build_config({"stages": stages}, "t"), offload_dir="off"
    )
    before = _results(conv)
    after = _results(load(out, SWE.name).conversation)
    long = [(b, a) for b, a in zip(before, after, strict=True) if len(b) > 2000 and is_cleared(a)]
    assert len(long) >= 3
    for original, hint in long:
        path = _cited(hint)
        assert path.startswith(f"{Path('off').resolve()}/trunc/")  # cited absolutely
        assert Path(path).read_bytes().decode("utf-8") == original
    # No file holds a truncated preview: the agent never reads its way through two.
    assert not any(is_truncated(p.read_bytes().decode()) for p in Path("off/clear").iterdir())
    assert restore_file("out", offload_dir="off") == SWE.read_bytes()
    assert report.tokens_after < report.tokens_before
