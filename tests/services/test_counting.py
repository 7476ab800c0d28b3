"""Token counting: engines agree, the parallel path equals the serial one, no recounting."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ctxcli.api import reduce_bytes
from ctxcli.core.errors import ConfigError
from ctxcli.formats import load
from ctxcli.pipeline.options import RunOptions
from ctxcli.services.tokens import bulk
from ctxcli.services.tokens.bulk import count_texts
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.services.tokens.engines import load_engine
from ctxcli.services.tokens.ledger import CountOptions, conversation_texts
from ctxcli.stages import StageContext, TokenLedger
from support.paths import REPO, shared_transcripts

EDGE_TEXTS = [
    "",
    " ",
    "  \n\n  x",
    "<|endoftext|> is just text here",
    "a\ud800b lone surrogate",
    "\n" * 1000,
    " " * 5000 + "x",
    "日本語のテキストと絵文字 🚀✅⚠️",
    "'s 'll 'VE 're",
    "\r\n\r\n\t\t  ",
    "x" * 300_000,
    '{"path": "src/app.py", "old": "ttl=0", "new": "ttl=300"}',
]


def _has_bpe_openai() -> bool:
    try:
        load_engine("cl100k", "bpe-openai")
    except ConfigError:
        return False
    return True


needs_bpe = pytest.mark.skipif(not _has_bpe_openai(), reason="bpe-openai is not installed")


def _real_texts() -> list[str]:
    """Every model-visible text of the real transcripts (and the bundled sample)."""
    texts: list[str] = []
    for path in [*shared_transcripts(), REPO / "sample_transcripts" / "openai_chat_support.jsonl"]:
        try:
            doc = load(path.read_bytes(), str(path), on_invalid="keep")
        except Exception:
            continue  # a format another part of ctx does not read yet
        texts.extend(conversation_texts(doc.conversation))
    return texts


@needs_bpe
def test_bpe_openai_counts_equal_tiktoken_on_edge_cases() -> None:
    fast = load_engine("cl100k", "bpe-openai")[1]
    slow = load_engine("cl100k", "tiktoken")[1]
    assert [fast(t) for t in EDGE_TEXTS] == [slow(t) for t in EDGE_TEXTS]


@needs_bpe
@pytest.mark.real_data
def test_bpe_openai_counts_equal_tiktoken_on_real_transcripts() -> None:
    texts = _real_texts()
    assert len(texts) > 1000
    fast = load_engine("cl100k", "bpe-openai")[1]
    slow = load_engine("cl100k", "tiktoken")[1]
    mismatches = [t[:80] for t in texts if fast(t) != slow(t)]
    assert mismatches == []


@needs_bpe
def test_o200k_works_offline_with_bpe_openai() -> None:
    counter = get_counter("o200k", engine="bpe-openai")
    assert counter.count("hello world") == 2
    assert counter.engine == "bpe-openai"


def test_unknown_engine_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    load_engine.cache_clear()
    monkeypatch.setenv("CTX_TOKEN_ENGINE", "sentencepiece")
    try:
        with pytest.raises(ConfigError, match="CTX_TOKEN_ENGINE"):
            load_engine("cl100k")
    finally:
        load_engine.cache_clear()


@pytest.mark.parametrize("engine", ["tiktoken", pytest.param("bpe-openai", marks=needs_bpe)])
def test_parallel_counts_equal_serial_counts(engine: str) -> None:
    fn = load_engine("cl100k", engine)[1]
    texts = [f"line {i} " * (i % 97 + 1) + EDGE_TEXTS[i % len(EDGE_TEXTS)] for i in range(600)]
    serial = count_texts("cl100k", engine, fn, texts, workers=1)
    seen: list[tuple[int, int]] = []
    parallel = count_texts(
        "cl100k",
        engine,
        fn,
        texts,
        workers=2,
        parallel_min_bytes=0,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert parallel == serial
    # Progress ends complete; its total is the distinct long texts the workers took.
    assert seen and seen[-1][0] == seen[-1][1] <= sum(map(len, texts))


def _big_transcript(results: int = 60) -> bytes:
    lines = [{"role": "user", "content": "fix the bug"}]
    for i in range(results):
        lines.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": f'{{"path": "f{i}.py"}}'},
                    }
                ],
            }
        )
        body = "\n".join(f"{j:5}\tdef f_{i}_{j}(x): return x * {j}  # 日本 ✅" for j in range(400))
        lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
    lines.append({"role": "assistant", "content": "done"})
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


def test_reduce_with_worker_processes_equals_single_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = _big_transcript()
    one = reduce_bytes(raw, options=RunOptions(counting=CountOptions(cache=False, workers=1)))
    # Force the pool even for this small input.
    monkeypatch.setattr(bulk, "PARALLEL_MIN_BYTES", 0)
    two = reduce_bytes(raw, options=RunOptions(counting=CountOptions(cache=False, workers=2)))
    assert two.output == one.output
    assert two.report.to_dict() == one.report.to_dict()


def test_each_distinct_text_is_counted_once() -> None:
    raw = _big_transcript()
    counter = get_counter("cl100k", workers=1)
    doc = load(raw)
    ledger = TokenLedger(counter)
    ledger.prime(doc.conversation)
    distinct = set(conversation_texts(doc.conversation))
    assert counter.counted == len(distinct)
    before = counter.counted
    # The stages and the report ask again and again: all lookups.
    for _ in range(3):
        ledger.total(doc.conversation)
        ledger.per_message(doc.conversation)
    assert counter.counted == before


def test_clear_tool_results_counts_the_transcript_once() -> None:
    from ctxcli.stages import get_stage
    from ctxcli.stages.clear_tool_results import ClearToolResultsOptions
    from ctxcli.store.naming import Preview

    doc = load(_big_transcript(200))
    calls: list[str] = []
    counter = bulk.CachedCounter("test", lambda t: calls.append(t) or len(t) // 4)
    ctx = StageContext(TokenLedger(counter), Preview("ctx-offload"))
    result = get_stage("clear_tool_results").fn(
        doc.conversation, ClearToolResultsOptions(max_tokens=1000), ctx
    )
    assert result.counters["cleared"] > 100
    # Linear: every original text once, nothing recounted per cleared message.
    assert len(set(calls)) == len(calls)
    assert len(calls) <= len(set(conversation_texts(doc.conversation)))


def test_approx_needs_no_engine() -> None:
    counter = get_counter("approx")
    assert counter.count("abcdefgh") == 2
    counter.count_many(["x" * 100])  # a no-op, not an error


def test_a_custom_count_function_also_runs_on_workers() -> None:
    texts = [f"word {i} " * (i % 50 + 1) for i in range(400)]
    custom = bulk.CachedCounter("custom", lambda t: len(t.split()), workers=2)
    custom.parallel_min_bytes = 0
    custom.count_many(texts)
    assert [custom.count(t) for t in texts] == [len(t.split()) for t in texts]


@pytest.mark.parametrize("workers", [1, 2])
def test_exceeds_agrees_with_total_at_every_limit(workers: int) -> None:
    doc = load(_big_transcript(30))
    counter = get_counter("cl100k", workers=workers)
    counter.parallel_min_bytes = 0
    ledger = TokenLedger(counter)
    ledger.prime(doc.conversation)  # with workers=2: counting in the background
    assert ledger.exceeds(doc.conversation, 1000)
    total = ledger.total(doc.conversation)
    for limit in (0, total - 1, total, total + 1):
        assert ledger.exceeds(doc.conversation, limit) is (total > limit)
    counter.finish()
    counter.close()


def test_background_counts_reach_the_disk_cache(tmp_path: Path) -> None:
    from ctxcli.services.tokens.count_cache import TokenCache

    texts = [f"text {i} " * 200 for i in range(100)]
    cache = TokenCache(tmp_path / "c.sqlite3")
    counter = get_counter("cl100k", workers=2, cache=cache)
    counter.parallel_min_bytes = 0
    counter.count_many(texts)
    counts = [counter.count(t) for t in texts]
    counter.finish()
    assert len(cache) == len(texts)
    again = get_counter("cl100k", cache=cache)
    again.count_many(texts)
    assert again.counted == 0
    assert [again.count(t) for t in texts] == counts
    cache.close()


class _Span:
    """A TextSpan that counts its reads."""

    def __init__(self, text: str) -> None:
        self._text, self.chars, self.reads = text, len(text), 0

    def text(self) -> str:
        self.reads += 1
        return self._text


def test_a_counted_span_is_not_read_again() -> None:
    texts = [f"{i} " + "word " * 400 for i in range(30)]
    spans = [_Span(t) for t in texts] + [_Span(texts[0])]  # one text twice
    counter = bulk.CachedCounter("words", lambda t: len(t.split()))
    counter.count_many(spans)
    read = [s.reads for s in spans]
    assert read == [2] * 30 + [1]  # for its digest, then to be counted (once per text)
    assert [counter.count_source(s) for s in spans] == [len(t.split()) for t in [*texts, texts[0]]]
    assert [counter.known_source(s) for s in spans[:2]] == [401, 401]
    assert [s.reads for s in spans] == read
    assert counter.counted == 30
    # A text read back as a str is found by its digest.
    assert counter.count(texts[5]) == 401 and counter.counted == 30


def test_approx_counts_a_span_without_reading_it() -> None:
    counter = get_counter("approx")
    span = _Span("é" * 5001)
    assert counter.count_source(span) == counter.count(span._text) == 1251
    assert span.reads == 0
