"""compress_words: older tool outputs lose low-information words, never their lines."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcli.api import reduce_bytes, reduce_file, restore_file
from ctxcli.core.errors import ConfigError
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.formats import load
from ctxcli.pipeline.config import build_config
from ctxcli.services.classifier import (
    HeuristicClassifier,
    WordStats,
    is_informative,
    is_protected,
)
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import StageContext, TokenLedger
from ctxcli.stages.compress_words import (
    CompressWordsOptions,
    compress_words,
    is_compressed,
    join_lines,
    model_call_ages,
    split_lines,
)
from ctxcli.store.naming import Preview
from support.paths import REPO, SHARED, need_shared

# ReasonBlocks' tiers, which the reasonblocks preset sets (ctx's defaults are more aggressive).
RB: dict[str, Any] = {
    "recent_calls": 3,
    "mid_calls": 10,
    "keep_ratio_mid": 0.55,
    "keep_ratio_old": 0.30,
}
FILLER = "the a of and to in is that it for on with as was this by be are".split()


def _output(seed: int, lines: int = 12) -> str:
    """A tool output with indentation, filler words and a few facts per line."""
    rnd = random.Random(seed)
    out = []
    for i in range(lines):
        indent = " " * (4 * (i % 3))
        words = rnd.choices(FILLER, k=8) + [f"src/mod_{seed}_{i}.py", str(1000 + i)]
        rnd.shuffle(words)
        out.append(indent + " ".join(words))
    return "\n".join(out) + "\n"


def _conv(outputs: Sequence[str], *, rounds_after: int = 0, group: bool = False) -> Conversation:
    """One call+result per output, then ``rounds_after`` assistant turns without calls."""
    messages = [Message("user", (Block(Kind.TEXT, "task"),), key=0)]
    for i, out in enumerate(outputs):
        messages.append(Message("assistant", (Block(Kind.TOOL_CALL, "{}", f"c{i}", "sh"),)))
        messages.append(Message("tool", (Block(Kind.TOOL_RESULT, out, f"c{i}"),)))
    for j in range(rounds_after):
        grp = "same" if group else None
        messages.append(Message("assistant", (Block(Kind.TEXT, f"thinking {j}"),), group=grp))
    return Conversation(tuple(messages))


def _ctx(**services: Any) -> StageContext:
    """A context with ``services`` as its fields (classifier, anthropic, answers)."""
    return StageContext(TokenLedger(get_counter("cl100k")), Preview("off"), **services)


def _results(conv: Conversation) -> list[str]:
    return [b.text for _ref, b in conv.iter_blocks(Kind.TOOL_RESULT)]


def _body(text: str) -> str:
    assert is_compressed(text)
    return text.rsplit("\n", 1)[0]


def test_recent_outputs_are_untouched() -> None:
    conv = _conv([_output(1), _output(2)])  # ages 1 and 0
    result = compress_words(conv, CompressWordsOptions(**RB), _ctx())
    assert result.conversation is conv
    assert result.counters["compressions"] == 0


def test_short_outputs_are_untouched() -> None:
    conv = _conv(["just a few words here"], rounds_after=12)
    assert compress_words(conv, CompressWordsOptions(), _ctx()).conversation is conv


def test_ages_count_model_calls_and_groups_once() -> None:
    conv = _conv(["x"], rounds_after=4)
    assert model_call_ages(conv)[2] == 4  # the result: four responses after it
    grouped = _conv(["x"], rounds_after=4, group=True)
    assert model_call_ages(grouped)[2] == 1  # four records of one response


def test_lines_and_indentation_survive() -> None:
    text = _output(7, lines=20)
    result = compress_words(_conv([text], rounds_after=12), CompressWordsOptions(), _ctx())
    out = _body(_results(result.conversation)[0])
    before, after = text.split("\n"), out.split("\n")
    assert len(after) == len(before)
    for old, new in zip(before, after, strict=True):
        if new:
            indent = old[: len(old) - len(old.lstrip())]
            assert new.startswith(indent) and not new[len(indent)].isspace()
            assert set(new.split()) <= set(old.split())
    assert result.counters["compressions"] == 1


def test_keep_ratio_changes_the_output() -> None:
    text = _output(3, lines=30)

    def kept(ratio: float) -> tuple[str, float]:
        opts = CompressWordsOptions(keep_ratio_old=ratio)
        result = compress_words(_conv([text], rounds_after=20), opts, _ctx())
        return _results(result.conversation)[0], result.counters["words_kept"] / result.counters[
            "words_total"
        ]

    (low, low_share), (high, high_share) = kept(0.2), kept(0.6)
    assert low != high and len(low) < len(high)
    assert low_share == pytest.approx(0.2, abs=0.02)
    assert high_share == pytest.approx(0.6, abs=0.02)
    assert "[ctx: compressed to 20% of words;" in low and "to 60% of words;" in high


def test_age_tiers_use_their_ratio() -> None:
    text = _output(5, lines=30)
    # results at ages 12 (old) and 5 (middle): the last three turns pad the ages
    conv = _conv([text, text], rounds_after=4)
    conv = conv.with_messages(
        [
            *conv.messages[:3],
            *[Message("assistant", (Block(Kind.TEXT, "t"),))] * 7,
            *conv.messages[3:],
        ]
    )
    ages = model_call_ages(conv)
    old_idx, mid_idx = 2, 11
    assert ages[old_idx] == 12 and ages[mid_idx] == 4
    result = compress_words(conv, CompressWordsOptions(**RB), _ctx())
    old, mid = _results(result.conversation)
    assert "compressed to 30% of words" in old
    assert re.search(r"compressed to 5[56]% of words", mid)


def test_rerun_is_a_no_op_and_original_is_offloaded() -> None:
    ctx = _ctx()
    conv = _conv([_output(1), _output(2)], rounds_after=12)
    once = compress_words(conv, CompressWordsOptions(), ctx)
    assert once.counters["compressions"] == 2
    assert isinstance(ctx.offload, Preview)
    assert sorted(ctx.offload.files) == ["compress_words/c0", "compress_words/c1"]
    assert "original saved to off/compress_words/c0]" in _results(once.conversation)[0]
    again = compress_words(once.conversation, CompressWordsOptions(keep_ratio_old=0.1), _ctx())
    assert again.conversation is once.conversation
    assert again.counters["already_compressed"] == 2


def test_marker_lines_of_other_stages_are_kept_whole() -> None:
    hint = "[ctx: output truncated, 5000 of 9000 chars omitted; full output saved to off/trunc/c0 (read it with read_file)]"
    marker = "[... 4000 chars truncated ...]"
    text = (
        _output(1)
        + marker
        + "\n[ctx: full output saved to off/head_tail/c0]\n"
        + hint
        + "\n"
        + _output(2)
    )
    result = compress_words(_conv([text], rounds_after=12), CompressWordsOptions(), _ctx())
    out = _results(result.conversation)[0]
    assert f"\n{marker}\n[ctx: full output saved to off/head_tail/c0]\n{hint}\n" in out


def test_assistant_text_only_when_asked() -> None:
    long_text = " ".join(FILLER * 4) + " see src/app.py line 1234"
    messages = [
        Message("user", (Block(Kind.TEXT, "task"),)),
        Message("assistant", (Block(Kind.TEXT, long_text),), key=1),
        *[Message("assistant", (Block(Kind.TEXT, f"t{i}"),)) for i in range(12)],
    ]
    conv = Conversation(tuple(messages))
    assert compress_words(conv, CompressWordsOptions(), _ctx()).conversation is conv
    result = compress_words(conv, CompressWordsOptions(include_assistant_text=True), _ctx())
    text = result.conversation.messages[1].text
    assert is_compressed(text) and "src/app.py" in text and "1234" in text
    assert "compress_words/text-1-0" in text


def test_an_injected_classifier_is_used() -> None:
    class KeepFirstHalf:
        name = "fake"

        def keep_mask(self, words: Sequence[str], keep_ratio: float) -> list[bool]:
            return [i < len(words) // 2 for i in range(len(words))]

    words = [f"w{a}{b}" for a in "abcdefghij" for b in "abcdefghij"]  # no protected word
    text = " ".join(words)
    result = compress_words(
        _conv([text], rounds_after=12),
        CompressWordsOptions(window_words=100),
        _ctx(classifier=KeepFirstHalf()),
    )
    assert _body(_results(result.conversation)[0]) == " ".join(words[:50])


def test_anthropic_without_key_falls_back_and_says_so() -> None:
    text = _output(4, lines=20)
    conv = _conv([text], rounds_after=12)
    heuristic = compress_words(conv, CompressWordsOptions(), _ctx())
    notes: list[str] = []
    ctx = StageContext(TokenLedger(get_counter("cl100k")), Preview("off"), log=notes.append)
    result = compress_words(conv, CompressWordsOptions(classifier="anthropic"), ctx)
    assert _results(result.conversation) == _results(heuristic.conversation)
    windows = result.counters["fallbacks"]
    assert windows >= 2 and result.counters["classifier_calls"] == 0
    assert any(
        "ANTHROPIC_API_KEY is not set" in n and 'classifier = "heuristic"' in n
        for n in result.notes
    )
    assert notes and all(n.startswith("compress_words: ") for n in notes)


def test_cutoffs_must_be_in_order() -> None:
    with pytest.raises(ConfigError, match=r"mid_calls \(0\) must be >= recent_calls \(1\)"):
        build_config({"stages": [{"use": "compress_words", "mid_calls": 0}]}, "ctx.toml")


# -- the heuristic ------------------------------------------------------------------------


def test_informative_words() -> None:
    for word in (
        "src/app.py",
        "1234",
        "snake_case",
        "camelCase",
        "KeyError:",
        "a=b",
        "<output>",
        "not",
        "C:\\x",
    ):
        assert is_informative(word), word
    for word in ("the", "done.", "(running)", "Hello"):
        assert not is_informative(word), word


def test_heuristic_drops_frequent_filler_first() -> None:
    words = "the config file at src/app.py says the port is 8080 and the host is alpha".split()
    stats = WordStats.from_texts([" ".join(words), "the the the the is is is and and"])
    mask = HeuristicClassifier(stats).keep_mask(words, 0.5)
    kept = [w for w, k in zip(words, mask, strict=True) if k]
    assert sum(mask) == round(0.5 * len(words))
    assert {"src/app.py", "8080"} <= set(kept)
    assert "the" not in kept and "is" not in kept


def test_heuristic_keeps_words_the_agent_used() -> None:
    words = "zebra yak xenon walrus".split()
    plain = HeuristicClassifier(WordStats.from_texts([" ".join(words)])).keep_mask(words, 0.25)
    mentioned = HeuristicClassifier(WordStats.from_texts([" ".join(words)], ["walrus"])).keep_mask(
        words, 0.25
    )
    assert plain == [True, False, False, False]  # a tie: the first word
    assert mentioned == [False, False, False, True]


def test_split_and_join_round_trip() -> None:
    text = "  a  b\tc\n\n    d e\n[ctx: keep me whole]\n"
    lines = split_lines(text)
    words = [w for line in lines for w in line.words]
    assert words == ["a", "b", "c", "d", "e"]
    assert join_lines(lines, [True] * 5) == text
    assert (
        join_lines(lines, [False, True, True, False, False]) == "  b\tc\n\n\n[ctx: keep me whole]\n"
    )


# -- end to end ------------------------------------------------------------------------------


def _jsonl(outputs: Sequence[str], rounds_after: int) -> bytes:
    lines: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, out in enumerate(outputs):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        lines.append({"role": "assistant", "content": None, "tool_calls": [call]})
        lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})
    lines += [{"role": "assistant", "content": f"step {j}"} for j in range(rounds_after)]
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def test_reduce_restore_and_rerun(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(_jsonl([_output(i, 20) for i in range(4)], 12))
    config = build_config({"stages": [{"use": "compress_words"}]}, "test")
    report, data = reduce_file(src, tmp_path / "out.jsonl", config=config)
    stage = report.stages[0]
    assert stage.counters["compressions"] == 4 and stage.tokens_after < stage.tokens_before
    assert (tmp_path / "out.jsonl.offload" / "compress_words" / "c0").read_text() == _output(0, 20)
    assert restore_file(tmp_path / "out.jsonl") == src.read_bytes()
    assert not reduce_bytes(data, config=config).report.changed


@pytest.mark.real_data
def test_real_transcript_keeps_paths_and_numbers() -> None:
    raw = (SHARED / "minisweagent_sqlfluff-1733_deepseek-chat.traj.json").read_bytes()
    conv = load(raw, "mini").conversation
    result = compress_words(conv, CompressWordsOptions(), _ctx())
    assert result.counters["compressions"] > 20
    before = {ref: b.text for ref, b in conv.iter_blocks(Kind.TOOL_RESULT)}
    paths = kept = 0
    for ref, block in result.conversation.iter_blocks(Kind.TOOL_RESULT):
        if block.text == before[ref]:
            continue
        original, body = before[ref], _body(block.text)
        assert len(body.split("\n")) == len(original.split("\n"))
        originals = {w for w in original.split() if "/" in w and "</" not in w}
        paths += len(originals)
        kept += len(originals & set(body.split()))
    # at 30-55% of the words, windows dense with paths (pip's URLs) lose a few
    assert kept / paths > 0.85


def test_chained_stages_save_more_than_either_alone() -> None:
    # Each stage sees the previous one's output: compress_words compresses what
    # head_tail kept, so the savings add up instead of one undoing the other.
    words = " ".join(f"alpha beta gamma delta item{i}" for i in range(300))
    raw = _jsonl([words] * 6, 0)
    chain = build_config({"stages": [{"use": "head_tail"}, {"use": "compress_words", **RB}]}, "t")

    def after(stages: list[dict[str, object]]) -> int:
        report = reduce_bytes(raw, config=build_config({"stages": stages}, "t")).report
        return report.tokens_after

    head, words_only = after([{"use": "head_tail"}]), after([{"use": "compress_words", **RB}])
    both = reduce_bytes(raw, config=chain)
    assert both.report.tokens_after < min(head, words_only)
    outputs = [json.loads(line)["content"] for line in both.output.splitlines()[2::2]]
    compressed = [o for o in outputs if is_compressed(o)]
    assert len(compressed) == 3
    assert all("chars truncated ...]\n[ctx: full output saved to" in o for o in compressed)
    assert not reduce_bytes(both.output, config=chain).report.changed  # idempotent chain


def test_a_text_mid_cutoff_calls_old_is_old() -> None:
    # ReasonBlocks: calls_back < mid_calls is mid, so exactly mid_calls is old.
    text = _output(9, lines=30)
    at_cutoff = compress_words(_conv([text], rounds_after=10), CompressWordsOptions(**RB), _ctx())
    assert "compressed to 30% of words" in _results(at_cutoff.conversation)[0]
    before = compress_words(_conv([text], rounds_after=9), CompressWordsOptions(**RB), _ctx())
    assert re.search(r"compressed to 5[56]% of words", _results(before.conversation)[0])


def test_real_transcript_tiers_match_reasonblocks() -> None:
    path = need_shared() / "sweagent_marshmallow-1867_fc.traj"
    conv = load(path.read_bytes(), str(path)).conversation
    ages = model_call_ages(conv)
    out = compress_words(conv, CompressWordsOptions(**RB), _ctx()).conversation
    pcts = {
        ages[mi]: int(m.group(1))
        for (mi, _bi), block in out.iter_blocks(Kind.TOOL_RESULT)
        if (m := re.search(r"compressed to (\d+)% of words", block.text))
    }
    # mid_calls calls old: the old tier (30%, more where protected words alone exceed it)
    assert 30 <= pcts[10] < 50
    assert all(pct >= 54 for age, pct in pcts.items() if age < 10)


@pytest.mark.parametrize(
    ("name", "tokenizer"),
    [
        ("codex_agentcmd_2025-09-25T08-02-05.jsonl", "cl100k"),
        ("anthropic_derived_from_cc_mclaude_3cfce0ff.jsonl", "approx"),
    ],
)
def test_rerun_on_real_transcripts_changes_nothing(name: str, tokenizer: str) -> None:
    # A text left alone because compressing it saved nothing must stay alone on a
    # rerun, although the compressed texts around it changed the word statistics.
    path = need_shared() / name
    stage = {"use": "compress_words", "recent_calls": 1, "mid_calls": 2, "min_content_words": 10}
    config = build_config({"tokenizer": tokenizer, "stages": [stage]}, "test")
    once = reduce_bytes(path.read_bytes(), config=config).output
    assert reduce_bytes(once, config=config).output == once


# -- protected words: paths, identifiers, numbers, error codes are never dropped ----------


def test_protected_words() -> None:
    for word in (
        "src/app.py",
        "C:\\Users\\x",
        "snake_case",
        "os.path.join",
        "setup.py,",
        "1234",
        "v2",
        "E501",
        "0x80004005",
        "404:",
        "(KeyError:",
        "ENOENT",
        "EACCES:",
    ):
        assert is_protected(word), word
    for word in ("the", "done.", "Hello", "camelCase", "OK", "", "...", "not"):
        assert not is_protected(word), word


def test_the_reasonblocks_preset_keeps_reasonblocks_tiers() -> None:
    stages = build_config({"preset": "reasonblocks"}, "t").stages
    opts = next(s.options for s in stages if s.use == "compress_words")
    assert {k: getattr(opts, k) for k in RB} == RB
    defaults = CompressWordsOptions()
    assert (defaults.recent_calls, defaults.keep_ratio_mid, defaults.keep_ratio_old) == (
        1,
        0.25,
        0.10,
    )


class DropAll:
    """A classifier that keeps as little as it may: only the first word of a window."""

    name = "drop-all"

    def keep_mask(self, words: Sequence[str], keep_ratio: float) -> list[bool]:
        return [i == 0 for i in range(len(words))]


_PROTECTED_WORDS = st.one_of(
    st.from_regex(r"[a-z]{1,6}(/[a-z_]{1,6}){1,3}\.(py|rs|json)", fullmatch=True),
    st.from_regex(r"[a-z]{1,5}_[a-z0-9_]{1,8}", fullmatch=True),
    st.from_regex(r"[a-z]{1,5}\.[a-z]{1,5}(\.[a-z]{1,5})?", fullmatch=True),
    st.integers(0, 10**9).map(str),
    st.from_regex(
        r"(E|W|ERR)[0-9]{2,4}|0x[0-9a-f]{4,8}|[A-Z][a-z]{2,6}Error|E[A-Z]{3,6}", fullmatch=True
    ),
)
_PLAIN_WORDS = st.sampled_from(FILLER + ["Alpha", "running", "done.", "(ok)", "value:"])


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(
        st.lists(st.one_of(_PROTECTED_WORDS, _PLAIN_WORDS), min_size=1, max_size=14),
        min_size=3,
        max_size=12,
    ),
    edge=st.sampled_from(["", ",", ":", ")", "'"]),
    ratio=st.sampled_from([0.05, 0.1, 0.3]),
    drop_all=st.booleans(),
)
def test_no_protected_word_is_ever_dropped(
    lines: list[list[str]], edge: str, ratio: float, drop_all: bool
) -> None:
    text = "\n".join("  " + " ".join(w + edge for w in words) for words in lines)
    services = {"classifier": DropAll()} if drop_all else {}
    opts = CompressWordsOptions(keep_ratio_mid=ratio, keep_ratio_old=ratio, min_content_words=1)
    result = compress_words(_conv([text], rounds_after=12), opts, _ctx(**services))
    out = _results(result.conversation)[0]
    kept = Counter(out.split())
    for word, n in Counter(text.split()).items():
        if is_protected(word):
            assert kept[word] >= n, (word, out)


@pytest.mark.parametrize("tokenizer", ["approx", "cl100k"])
def test_every_text_of_a_tier_is_compressed_whatever_the_counter(tokenizer: str) -> None:
    # Issue 35: 13 results of 80 words, one per call, ReasonBlocks' tiers. Under approx
    # the texts 3, 4, 7 and 9 calls old were left whole while 5, 6 and 8 were compressed:
    # the "would it get shorter" bound summed chars/4 rounded up word by word.
    words = (REPO / "docs" / "sessions.md").read_text("utf-8").split()
    outputs = [" ".join(words[80 * i : 80 * (i + 1)]) for i in range(13)]
    conv = _conv(outputs)
    ctx = StageContext(TokenLedger(get_counter(tokenizer)), Preview("off"))
    out = compress_words(conv, CompressWordsOptions(**RB), ctx).conversation
    ages = model_call_ages(conv)
    got = {ages[ref[0]]: is_compressed(b.text) for ref, b in out.iter_blocks(Kind.TOOL_RESULT)}
    assert got == {age: age >= RB["recent_calls"] for age in range(13)}
