"""The Anthropic paths (classifier, token counter) through the real SDK and a loopback server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxcli.api import reduce_bytes
from ctxcli.core.errors import ClassifierError, ConfigError
from ctxcli.pipeline.config import build_config
from ctxcli.pipeline.options import RunOptions
from ctxcli.services.answer_cache import AnswerCache
from ctxcli.services.anthropic_client import AnthropicAccess, ReplyError
from ctxcli.services.classifier import (
    AnthropicClassifier,
    HeuristicClassifier,
    is_informative,
    parse_reply,
)
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.services.tokens.ledger import CountOptions
from support.cli import invoke
from support.fake_api import (
    COUNT_TOKENS,
    MESSAGES,
    AnthropicServer,
    Reply,
    Request,
    garbage,
    message,
    rate_limited,
    server_error,
    timeout,
)

KEY = "test-key"


def numbered_words(request: Request) -> list[str]:
    """The words of a classifier request, in order."""
    return [line.split("\t", 1)[1] for line in request.prompt.splitlines()]


def keep_even(request: Request) -> Reply:
    """A model that keeps the words at even positions."""
    if request.path != MESSAGES:
        return Reply(404, {})
    n = len(numbered_words(request))
    return message(json.dumps(list(range(0, n, 2))))


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer(keep_even) as srv:
        yield srv


def _window(n: int = 20, seed: str = "w") -> list[str]:
    return [f"{seed}ord{i}" if i % 5 else f"file_{i}.py" for i in range(n)]


def _classifier(server: AnthropicServer, tmp_path: Path, **kw: Any) -> AnthropicClassifier:
    options: dict[str, Any] = {"max_retries": 0, "timeout_seconds": 5.0}
    options.update(kw)
    return AnthropicClassifier(
        fallback=HeuristicClassifier(),
        access=AnthropicAccess(KEY, server.base_url),
        cache=AnswerCache(tmp_path / "cache"),
        **options,
    )


def _expected(words: list[str]) -> list[bool]:
    return [i % 2 == 0 or is_informative(w) for i, w in enumerate(words)]


# -- replies --------------------------------------------------------------------------------


def test_parse_reply_shapes() -> None:
    assert parse_reply("Here: [0, 2]", 3) == [True, False, True]
    assert parse_reply('["KEEP", "DROP", "keep"]', 3) == [True, False, True]
    for text, why in [
        ("keep all of them", "unparseable"),
        ("[0, 1, 7]", "wrong length"),
        ('["KEEP", "DROP"]', "wrong length"),
        ("[]", "kept nothing"),
        ('[{"i": 0}]', "unparseable"),
    ]:
        with pytest.raises(ReplyError, match=why):
            parse_reply(text, 3)


# -- the classifier through the SDK ---------------------------------------------------------


def test_success_and_request_shape(server: AnthropicServer, tmp_path: Path) -> None:
    words = _window()
    clf = _classifier(server, tmp_path, model="claude-haiku-4-5")
    assert clf.keep_mask(words, 0.4) == _expected(words)
    assert (clf.calls, clf.cache_hits, clf.fallbacks) == (1, 0, 0)
    (request,) = server.requests
    assert request.path == MESSAGES
    assert request.body["model"] == "claude-haiku-4-5"
    assert "Keep about 40% of the words (8 of 20)" in request.system
    assert "JSON array of the indices of the words to KEEP" in request.system
    assert numbered_words(request) == words
    # the SDK sent the key (the server never stores it)
    assert "<redacted>" in (request.headers.get("x-api-key"), request.headers.get("authorization"))
    clf.close()


def test_rerun_is_answered_from_the_cache(server: AnthropicServer, tmp_path: Path) -> None:
    windows = [_window(seed=s) for s in "abc"]
    first = _classifier(server, tmp_path)
    masks = first.keep_masks(windows, 0.5)
    first.close()
    assert server.count() == 3
    again = _classifier(server, tmp_path)
    assert again.keep_masks(windows, 0.5) == masks
    assert server.count() == 3  # no new request
    assert (again.calls, again.cache_hits) == (0, 3)
    # another ratio or model is another question
    other = _classifier(server, tmp_path, model="claude-sonnet-4-6")
    other.keep_masks(windows[:1], 0.5)
    assert (other.calls, server.count()) == (1, 4), other.fallback_reasons
    lower = _classifier(server, tmp_path)
    lower.keep_masks(windows[:1], 0.3)
    assert (lower.calls, server.count()) == (1, 5), lower.fallback_reasons


def test_timeout_falls_back(server: AnthropicServer, tmp_path: Path) -> None:
    server.push(timeout(10))
    words = _window()
    clf = _classifier(server, tmp_path, timeout_seconds=0.3)
    assert clf.keep_mask(words, 0.5) == HeuristicClassifier().keep_mask(words, 0.5)
    # "timeout" proves the client gave up before the server's 10 s answer: no clock needed.
    assert clf.fallbacks == 1 and clf.fallback_reasons == {"timeout": 1}


def test_rate_limit_then_success_is_retried(server: AnthropicServer, tmp_path: Path) -> None:
    server.push(rate_limited(), rate_limited())
    words = _window()
    clf = _classifier(server, tmp_path, max_retries=2)
    assert clf.keep_mask(words, 0.5) == _expected(words)
    assert server.count(MESSAGES) == 3  # two 429s, then the answer: real SDK retries
    assert clf.fallbacks == 0 and clf.calls == 1


def test_rate_limit_beyond_retries_falls_back(server: AnthropicServer, tmp_path: Path) -> None:
    server.push(*[rate_limited()] * 3)
    clf = _classifier(server, tmp_path, max_retries=1)
    clf.keep_mask(_window(), 0.5)
    assert server.count() == 2
    assert clf.fallback_reasons == {"HTTP 429 rate limited": 1}


def test_server_error_falls_back(server: AnthropicServer, tmp_path: Path) -> None:
    server.push(server_error(500), server_error(500))
    clf = _classifier(server, tmp_path, max_retries=1)
    clf.keep_mask(_window(), 0.5)
    assert server.count() == 2
    assert clf.fallback_reasons == {"HTTP 500": 1}


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (garbage(), None),
        (message("Sure! I would keep the important words."), "unparseable reply"),
        (message("[0, 1, 2, 99]"), "wrong length"),
        (message('["KEEP", "DROP"]'), "wrong length"),
    ],
    ids=["not-json", "prose", "index-out-of-range", "labels-too-short"],
)
def test_bad_replies_fall_back_and_are_not_cached(
    server: AnthropicServer, tmp_path: Path, reply: Reply, reason: str | None
) -> None:
    server.push(reply)
    words = _window()
    clf = _classifier(server, tmp_path)
    assert clf.keep_mask(words, 0.5) == HeuristicClassifier().keep_mask(words, 0.5)
    assert clf.fallbacks == 1
    if reason is not None:
        assert clf.fallback_reasons == {reason: 1}
    # the failure was not cached: the next run asks again and gets a good answer
    again = _classifier(server, tmp_path)
    assert again.keep_mask(words, 0.5) == _expected(words)
    assert again.cache_hits == 0 and server.count() == 2


def test_one_failed_window_does_not_spoil_the_others(
    server: AnthropicServer, tmp_path: Path
) -> None:
    server.push(message("nonsense"))
    # words without a digit, so the fallback heuristic may drop them (it keeps protected words)
    windows = [
        [f"{s}word{chr(97 + i)}" if i % 5 else f"file_{i}.py" for i in range(20)] for s in "abcd"
    ]
    clf = _classifier(server, tmp_path, concurrency=1)
    masks = clf.keep_masks(windows, 0.5)
    assert clf.fallbacks == 1 and clf.calls == 4
    assert sum(m == _expected(w) for m, w in zip(masks, windows, strict=True)) == 3


def test_concurrency_is_bounded(tmp_path: Path) -> None:
    """Three requests are in flight at once, never a fourth; no clock can fail it.

    The first three requests wait for one another at a barrier, so they are answered
    only if the classifier really sent three at once (a serial one breaks the barrier
    and falls back). Then they stay a moment longer, to give a pool that is too big
    the chance to send a fourth meanwhile. ``active`` drops before each answer is
    sent, and a worker sends its next request only after reading its answer, so a
    pool of three never makes it four, however slow the machine: the waits can only
    let a bug go unseen, never fail a correct classifier.
    """
    lock = threading.Condition()
    together = threading.Barrier(3)
    arrived = active = peak = 0

    def meet(request: Request) -> Reply:
        nonlocal arrived, active, peak
        with lock:
            arrived += 1
            first = arrived <= 3
            active += 1
            peak = max(peak, active)
            lock.notify_all()
        try:
            if first:
                together.wait(timeout=60)  # generous: only a broken pool ever waits it out
                with lock:
                    lock.wait_for(lambda: arrived > 3, timeout=0.5)
            return keep_even(request)
        except threading.BrokenBarrierError:
            return server_error()
        finally:
            with lock:
                active -= 1

    with AnthropicServer(meet) as srv:
        clf = _classifier(srv, tmp_path, concurrency=3, timeout_seconds=120.0)
        windows = [_window(seed=str(i)) for i in range(12)]
        masks = clf.keep_masks(windows, 0.5)
        assert srv.count() == 12
    assert clf.fallbacks == 0, clf.fallback_reasons
    assert masks == [_expected(w) for w in windows]
    assert peak == 3


# -- the stage, end to end -------------------------------------------------------------------


def _transcript() -> bytes:
    text = "\n".join(
        f"the result of step {i} is that module_{i} was loaded from the cache and is fine"
        for i in range(12)
    )
    lines: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(2):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        lines.append({"role": "assistant", "content": None, "tool_calls": [call]})
        lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": text})
    lines += [{"role": "assistant", "content": f"step {j}"} for j in range(12)]
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def test_stage_uses_the_api_and_caches_in_ctx_cache_dir(
    server: AnthropicServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    cache_dir = tmp_path / "answers"
    monkeypatch.setenv("CTX_CACHE_DIR", str(cache_dir))
    stage = {"use": "compress_words", "classifier": "anthropic", "base_url": server.base_url}
    config = build_config({"stages": [stage]}, "test")
    first = reduce_bytes(_transcript(), config=config)
    counters = first.report.stages[0].counters
    calls = counters["classifier_calls"]
    assert calls >= 4 and counters["fallbacks"] == 0 and counters["compressions"] == 2
    assert server.count(MESSAGES) == calls
    assert (cache_dir / AnswerCache.FILE).is_file()
    second = reduce_bytes(_transcript(), config=config)
    assert second.output == first.output
    assert second.report.stages[0].counters["cache_hits"] == calls
    assert server.count(MESSAGES) == calls  # the rerun made no request
    assert KEY not in json.dumps(second.report.to_dict())


def test_no_cache_makes_the_rerun_ask_again(
    server: AnthropicServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--no-cache (CountOptions(cache=False)) turns the answer cache off too."""

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("CTX_CACHE_DIR", str(tmp_path / "answers"))
    stage = {"use": "compress_words", "classifier": "anthropic", "base_url": server.base_url}
    config = build_config({"stages": [stage]}, "test")
    off = CountOptions(cache=False)
    first = reduce_bytes(_transcript(), config=config, options=RunOptions(counting=off))
    calls = first.report.stages[0].counters["classifier_calls"]
    second = reduce_bytes(_transcript(), config=config, options=RunOptions(counting=off))
    assert second.report.stages[0].counters["cache_hits"] == 0
    assert server.count(MESSAGES) == 2 * calls
    assert not (tmp_path / "answers" / AnswerCache.FILE).exists()


def test_stage_without_key_warns_once_and_works_offline(server: AnthropicServer) -> None:
    stage = {"use": "compress_words", "classifier": "anthropic", "base_url": server.base_url}
    reduced = reduce_bytes(_transcript(), config=build_config({"stages": [stage]}, "test"))
    assert server.count() == 0
    assert reduced.report.stages[0].counters["compressions"] == 2
    warnings = [w for w in reduced.report.warnings if "ANTHROPIC_API_KEY" in w]
    assert len(warnings) == 1 and 'classifier = "heuristic"' in warnings[0]


# -- tokenizer = "anthropic" ------------------------------------------------------------------


def test_token_counter_needs_a_key() -> None:
    with pytest.raises(ConfigError, match=r'tokenizer "anthropic" needs ANTHROPIC_API_KEY'):
        get_counter("anthropic")


def test_token_counts_come_from_the_endpoint_and_are_cached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    raw = _transcript()
    config = build_config({"tokenizer": "anthropic", "stages": []}, "test")
    with AnthropicServer() as srv:  # counts 7 + the words of the request
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        report = reduce_bytes(raw, config=config).report
        asked = srv.count(COUNT_TOKENS)
        assert asked > 2 and srv.count(MESSAGES) == 0
        texts = [json.loads(line).get("content") or "" for line in raw.splitlines()]
        words = sum(len(t.split()) for t in texts)
        calls = sum(2 for line in raw.splitlines() if b"tool_calls" in line)  # name + "{}"
        assert report.tokens_before == words + calls
        again = reduce_bytes(raw, config=config).report
        assert again.tokens_before == report.tokens_before
        assert srv.count(COUNT_TOKENS) == asked  # all from the disk cache


def test_token_counting_failure_is_exit_3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    src = tmp_path / "t.jsonl"
    src.write_bytes(_transcript())
    with AnthropicServer(lambda r: server_error(500)) as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        result = invoke(["stats", str(src), "--tokenizer", "anthropic"], code=3)
    assert result.stdout == ""
    assert "ctx: error: anthropic token counting failed (HTTP 500" in result.stderr
    assert 'tokenizer = "cl100k"' in result.stderr and KEY not in result.stderr


def test_token_counter_error_names_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with AnthropicServer(lambda r: rate_limited()) as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        counter = get_counter("anthropic")
        with pytest.raises(ClassifierError, match="HTTP 429"):
            counter.count("some text")


def test_long_texts_left_in_the_input_are_counted_once_by_the_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Long tool outputs of an OpenAI-chat file stay in the input (lazy blocks): the
    # counter is handed their spans, and must still ask for each text once.
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    lines: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(3):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        lines.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out = f"output {i}: " + "module loaded from the cache " * 60
        lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})
    raw = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    config = build_config({"tokenizer": "anthropic", "stages": []}, "test")
    with AnthropicServer() as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        options = RunOptions(counting=CountOptions(cache=False))
        report = reduce_bytes(raw, config=config, options=options).report
        # "go", "sh", "{}", three outputs, and the one-message overhead.
        assert srv.count(COUNT_TOKENS) == 7
    words = 1 + 3 * 2 + sum(len(line["content"].split()) for line in lines[2::2])
    assert report.tokens_before == words
