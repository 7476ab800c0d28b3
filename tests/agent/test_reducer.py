"""The in-process reducer: memory across calls, same bytes for what was sent, pairs kept."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcli import Reducer
from ctxcli.core.errors import TranscriptError
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.pipeline.live_loop import chain_digests, common_prefix

BIG = 60_000  # characters: over eino's truncation limit (50,000)


def tool_round(i: int, size: int) -> list[dict[str, Any]]:
    """One assistant call and its result (``size`` characters)."""
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{i}.py"})},
            }
        ],
    }
    body = "".join(f"{i}:{n} some output line\n" for n in range(size // 20 + 1))[:size]
    return [call, {"role": "tool", "tool_call_id": f"call_{i}", "content": body}]


def conversation(rounds: int, size: int = 3000, big_every: int = 7) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug."},
    ]
    for i in range(rounds):
        msgs += tool_round(i, BIG if i % big_every == 3 else size)
    return msgs


def assert_pairs(messages: list[dict[str, Any]]) -> None:
    """Every tool result answers a call sent before it, and every call is answered."""
    open_calls: set[str] = set()
    for m in messages:
        for call in m.get("tool_calls") or []:
            open_calls.add(call["id"])
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls, m
            open_calls.discard(m["tool_call_id"])
    assert not open_calls


def test_growing_conversation_keeps_what_was_sent(tmp_path: Path) -> None:
    reducer = Reducer(preset="eino", offload_dir=tmp_path / "off")
    full = conversation(40)
    sent_before: dict[int, bytes] = {}
    marked: set[int] = set()
    previous: list[dict[str, Any]] = []
    for n in range(4, len(full) + 1, 2):
        out = reducer.reduce(full[:n])
        assert len(out.messages) == n  # eino never drops a message
        assert_pairs(out.messages)
        for i, msg in enumerate(out.messages):
            data = json.dumps(msg, sort_keys=True).encode()
            # A message reduced once is sent as the same bytes ever after, unless a
            # later call cuts deeper (a truncated result cleared once over budget).
            if i in marked:
                assert data == sent_before[i] or b"[ctx cleared" in data
            if b"[ctx" in data:
                marked.add(i)
            if i in sent_before and b"[ctx cleared" in sent_before[i]:
                assert data == sent_before[i]
            sent_before[i] = data
        assert out.reused == (n - 2 if previous else 0)
        if out.changed_prefix_at is None:
            assert out.messages[: len(previous)] == previous
        else:
            assert out.messages[out.changed_prefix_at] != previous[out.changed_prefix_at]
            assert out.messages[: out.changed_prefix_at] == previous[: out.changed_prefix_at]
        previous = out.messages
    assert out.tokens_after < out.tokens_before
    assert out.tokens_after <= 30_000 + 20_000  # budget plus the last, protected round
    assert marked


@pytest.mark.parametrize("keep_originals", [True, False])
def test_rerun_on_same_input_changes_nothing(tmp_path: Path, keep_originals: bool) -> None:
    reducer = Reducer(preset="eino", offload_dir=tmp_path / "off", keep_originals=keep_originals)
    msgs = conversation(30)
    first = reducer.reduce(msgs)
    again = reducer.reduce(msgs)
    assert again.reused == len(msgs)
    assert again.changed_prefix_at is None
    assert again.offloaded == []
    assert all(a is b for a, b in zip(first.messages, again.messages, strict=True))
    # A copy of the same input (fresh dicts, other key order) is the same conversation.
    copied = [dict(reversed(list(m.items()))) for m in json.loads(json.dumps(msgs))]
    assert reducer.reduce(copied).reused == len(msgs)


def test_offloaded_text_is_readable_at_the_cited_absolute_path(tmp_path: Path) -> None:
    reducer = Reducer(preset="eino", offload_dir=tmp_path / "off")
    msgs = conversation(8)
    out = reducer.reduce(msgs)
    assert out.offloaded
    for path in out.offloaded:
        assert Path(path).is_absolute() and Path(path).is_file()
    texts = {m["tool_call_id"]: m["content"] for m in msgs if m["role"] == "tool"}
    for msg in out.messages:
        if msg["role"] == "tool" and "[ctx" in msg["content"]:
            cited = msg["content"].split("saved to ")[1].split()[0].rstrip("]")
            assert Path(cited).read_text() == texts[msg["tool_call_id"]]
            assert reducer.offload.read(cited) == texts[msg["tool_call_id"]]


def test_only_new_texts_are_counted(tmp_path: Path) -> None:
    reducer = Reducer(preset="eino", offload_dir=tmp_path / "off", tokenizer="cl100k")
    msgs = conversation(20)
    reducer.reduce(msgs)
    counted = reducer._counter.counted
    msgs += tool_round(99, 3000)
    reducer.reduce(msgs)
    # The new call's arguments, its name and its result; nothing of the prefix.
    assert reducer._counter.counted - counted <= 3


@pytest.mark.parametrize("keep_originals", [True, False])
def test_an_edited_earlier_message_is_reprocessed_from_there(
    tmp_path: Path, keep_originals: bool
) -> None:
    reducer = Reducer(preset="eino", offload_dir=tmp_path / "off", keep_originals=keep_originals)
    msgs = conversation(10)
    first = reducer.reduce(msgs)
    edited = [dict(m) for m in msgs]
    edited[5] = {**edited[5], "content": "short now"}
    out = reducer.reduce(edited)
    assert out.reused == 5
    assert out.changed_prefix_at == 5
    assert out.messages[5]["content"] == "short now"
    assert out.messages[:5] == first.messages[:5]


@pytest.mark.parametrize("keep_originals", [True, False])
def test_the_callers_dicts_are_not_aliased(tmp_path: Path, keep_originals: bool) -> None:
    reducer = Reducer(preset="eino", offload_dir=tmp_path / "off", keep_originals=keep_originals)
    msgs = [{"role": "user", "content": "a"}]
    out = reducer.reduce(msgs)
    msgs[0]["content"] = "b"  # the caller edits its own dict afterwards
    assert out.messages[0]["content"] == "a"
    again = reducer.reduce(msgs)
    assert again.reused == 0 and again.changed_prefix_at == 0


def test_anthropic_messages_and_system(tmp_path: Path) -> None:
    reducer = Reducer(preset="eino", offload_dir=tmp_path / "off", api="anthropic")
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(12):
        msgs.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"i": i}}],
            }
        )
        body = tool_round(i, BIG if i == 2 else 12_000)[1]["content"]
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": body}],
            }
        )
    out = reducer.reduce(msgs, system="You are Claude Code.")
    assert [m["role"] for m in out.messages] == [m["role"] for m in msgs]
    results = [m["content"][0] for m in out.messages[2::2]]
    assert all(r["type"] == "tool_result" for r in results)
    assert "[ctx cleared: " in results[0]["content"]
    assert results[-1]["content"] == msgs[-1]["content"][0]["content"]
    assert out.tokens_before > out.tokens_after
    again = reducer.reduce(msgs, system="You are Claude Code.")
    assert again.reused == len(msgs) and again.changed_prefix_at is None
    # Another system prompt invalidates every cached prefix.
    other = reducer.reduce(msgs, system="Another prompt.")
    assert other.reused == 0 and other.changed_prefix_at == 0


def test_bad_message_names_its_position(tmp_path: Path) -> None:
    reducer = Reducer(offload_dir=tmp_path / "off")
    with pytest.raises(TranscriptError, match=r"^messages\[1\]: not an OpenAI chat message"):
        reducer.reduce([{"role": "user", "content": "a"}, {"content": "no role"}])
    with pytest.raises(TranscriptError, match=r"^messages\[0\]: not an OpenAI chat message"):
        reducer.reduce(["not a dict"], system="You are an agent.")


def test_read_tool_is_named_in_hints(tmp_path: Path) -> None:
    reducer = Reducer(preset="eino", offload_dir=tmp_path / "off", read_tool="ctx_read")
    out = reducer.reduce(conversation(4, big_every=4))
    assert any("read it with ctx_read" in str(m.get("content")) for m in out.messages)


def test_fsspec_url_store() -> None:
    pytest.importorskip("fsspec", reason="fsspec cannot be installed here")
    reducer = Reducer(preset="eino", offload_dir="memory://ctx-live-test")
    out = reducer.reduce(conversation(4, big_every=4))
    assert out.offloaded and out.offloaded[0].startswith("memory://ctx-live-test/trunc/")
    assert reducer.offload.read(out.offloaded[0]).startswith("3:0 some output line")


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=6))
def test_truncation_incremental_equals_full_run(tmp_path_factory: Any, cuts: list[int]) -> None:
    """Per-message stages give the same output whatever the calls the history came in."""
    config = build_config({"stages": [{"use": "truncate_tool_output", "max_chars": 5000}]}, "test")
    root = tmp_path_factory.mktemp("off")
    msgs = conversation(30, size=2000, big_every=4)
    full = Reducer(config, offload_dir=root).reduce(msgs).messages
    growing = Reducer(config, offload_dir=root)
    for n in sorted(cuts):
        growing.reduce(msgs[:n])
    assert growing.reduce(msgs).messages == full


def test_chain_prefix() -> None:
    a = chain_digests([{"a": 1}, {"b": 2}, {"c": 3}])
    b = chain_digests([{"a": 1}, {"b": 2}, {"c": 4}, {"d": 5}])
    assert common_prefix(a, b) == 2
    assert common_prefix(a, a[:1]) == 1
    assert common_prefix(a, chain_digests([{"z": 0}, {"b": 2}])) == 0


def test_bounded_memory_keeps_no_originals(tmp_path: Path) -> None:
    reducer = Reducer(preset="eino", offload_dir=tmp_path / "off", keep_originals=False)
    msgs = conversation(10)
    reducer.reduce(msgs)
    assert reducer._state.originals is None
    assert reducer.reduce(msgs + tool_round(50, 100)).reused == len(msgs)


@pytest.mark.parametrize("preset", ["eino", "claude-code-resume", "reasonblocks", "synaptic"])
def test_every_preset_in_a_growing_loop(tmp_path: Path, preset: str) -> None:
    """Chains that drop (synaptic) or add (reasonblocks' nudge) messages keep their memory too."""
    reducer = Reducer(preset=preset, offload_dir=tmp_path / "off", tokenizer="approx")
    full = conversation(30, size=9000, big_every=6)
    for n in range(4, len(full) + 1, 4):
        out = reducer.reduce(full[:n])
        assert_pairs(out.messages)
        assert len(out.sources) == len(out.messages)
        for data, source in zip(out.messages, out.sources, strict=True):
            if source is not None:
                assert data["role"] == full[source]["role"]
                if data.get("tool_call_id"):
                    assert data["tool_call_id"] == full[source]["tool_call_id"]
        again = reducer.reduce(full[:n])
        assert again.messages == out.messages and again.changed_prefix_at is None
    assert out.tokens_after < out.tokens_before


def test_read_window_pages_and_stays_inside_the_store(tmp_path: Path) -> None:
    from ctxcli.core.errors import OffloadError

    reducer = Reducer(preset="eino", offload_dir=tmp_path / "off")
    text = "".join(f"line {n}\n" for n in range(10))
    path = reducer.offload.put("trunc", "call_1", text)
    assert reducer.offload.read_window(path, 0, 3) == (
        "line 0\nline 1\nline 2\n[ctx: lines 0-2 of 10 shown; read on with offset=3]"
    )
    assert reducer.offload.read_window(path, 8, 5) == "line 8\nline 9\n"
    assert reducer.offload.read_window("trunc/call_1", 9, 1) == "line 9\n"
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    for bad in (str(outside), f"{reducer.offload_dir}/../secret.txt", "trunc/../../secret.txt"):
        with pytest.raises(OffloadError):
            reducer.offload.read(bad)
    # Another conversation's text under the same id gets its own file.
    other = reducer.offload.put("trunc", "call_1", "another text")
    assert other != path and Path(other).read_text() == "another text"
    assert reducer.offload.put("trunc", "call_1", text) == path


@pytest.mark.parametrize("enabled", [True, False], ids=["on", "off"])
def test_the_collector_pauses_for_a_reduce_and_is_left_as_it_was(
    enabled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxcli.pipeline import compose as reducer

    seen: list[bool] = []
    real_load = reducer.load

    def load(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real_load(*args, **kwargs)

    monkeypatch.setattr(reducer, "load", load)
    (gc.enable if enabled else gc.disable)()
    try:
        reduce_bytes(b'{"role": "user", "content": "hi"}\n')
        with pytest.raises(TranscriptError):
            reduce_bytes(b"not json\n")
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
    assert seen == [False, False]


# -- issue 35: Reducer(config=...) takes a plain dict like the other library calls --------


def test_a_reducer_takes_a_plain_dict_config(tmp_path: Path) -> None:
    table = {"tokenizer": "approx", "stages": [{"use": "truncate_tool_output", "max_chars": 800}]}
    from_dict = Reducer(config=table, offload_dir=tmp_path / "a")
    from_config = Reducer(config=build_config(table, "t"), offload_dir=tmp_path / "b")
    messages = conversation(4, size=3000, big_every=1)
    assert from_dict.config.stages == from_config.config.stages
    sent = from_dict.reduce(messages).messages
    assert json.dumps(sent).count("[ctx") == json.dumps(
        from_config.reduce(messages).messages
    ).count("[ctx")


def test_a_reducer_config_of_another_type_is_one_line_error() -> None:
    from ctxcli.core.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"^Reducer config: str is not a configuration; pass a Config"
    ) as info:
        Reducer(config="ctx.toml")  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"unknown key 'max_tokenz'"):
        Reducer(config={"max_tokenz": 3})
