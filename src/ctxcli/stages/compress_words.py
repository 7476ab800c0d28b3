"""Stage compress_words: drop low-information words from older tool outputs, by age."""

from __future__ import annotations

import heapq
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from ctxcli.core.model import Block, BlockRef, Conversation, Kind, visible_texts
from ctxcli.services.anthropic_client import DEFAULT_MODEL
from ctxcli.services.classifier import (
    AnthropicClassifier,
    HeuristicClassifier,
    WordStats,
    classify_windows,
    is_protected,
)
from ctxcli.stages._naming import result_key
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register
from ctxcli.stages.head_tail import replace_blocks

__all__ = [
    "AREA",
    "CompressWordsOptions",
    "compress_words",
    "is_compressed",
    "join_lines",
    "model_call_ages",
    "split_lines",
    "windows_of",
]

AREA = "compress_words"

_MARK = {
    "en": "[ctx: compressed to {pct}% of words; original saved to {path}]",
    "zh": "[ctx: 已压缩至 {pct}% 的词；原文已保存到 {path}]",
}
_MARK_RE = re.compile(r"\n?\[ctx: (?:compressed to|已压缩至) \d+%[^\]\n]*\]\n?$")
# Lines kept whole: what other stages left behind (hints naming offload files, the
# head_tail marker; dropping a word there loses the way back to the original), and
# lines of bare markup such as "<output>" or "<returncode>1</returncode>", which
# agents use to frame tool output.
_PROTECTED_LINE = re.compile(
    r"^\s*(?:\[(?:ctx[:：\s]|\.\.\. \d+ chars truncated \.\.\.\])|"
    r"(?:</?[A-Za-z][\w.-]*>[^<\s]*)+\s*$)"
)
_WORD = re.compile(r"(\s*)(\S+)")


class CompressWordsOptions(StageOptions):
    """Options of compress_words."""

    renamed = {"recent_cutoff": "recent_calls", "mid_cutoff": "mid_calls"}

    classifier: Literal["heuristic", "anthropic"] = Field(
        "heuristic",
        description="heuristic (offline, default) or anthropic (a small Claude model labels "
        "words; needs ANTHROPIC_API_KEY, falls back to the heuristic per window).",
    )
    recent_calls: int = Field(
        1, ge=0, description="Texts fewer than this many model calls old stay untouched."
    )
    mid_calls: int = Field(
        10,
        ge=0,
        description="Texts fewer than this many model calls old keep keep_ratio_mid; "
        "older ones keep keep_ratio_old.",
    )
    # Defaults measured by `make eval` (benchmarks/eval.py --sweep) on ../shared/transcripts:
    # protected words (paths, identifiers, numbers, error codes) always stay, so these
    # ratios only decide how much prose goes; recall stayed >= 96.5% on every file.
    keep_ratio_mid: float = Field(
        0.25,
        gt=0,
        le=1,
        description="Share of words kept in texts of middle age (protected words always stay).",
    )
    keep_ratio_old: float = Field(
        0.10,
        gt=0,
        le=1,
        description="Share of words kept in texts mid_calls or more calls old "
        "(protected words always stay).",
    )
    window_words: int = Field(
        50, ge=5, le=1000, description="Words judged together (one classifier request)."
    )
    min_content_words: int = Field(
        30, ge=1, description="Texts with fewer words than this are left alone."
    )
    include_assistant_text: bool = Field(
        False, description="Also compress older assistant text (never thinking or tool calls)."
    )
    model: str = Field(DEFAULT_MODEL, description="Claude model of the anthropic classifier.")
    base_url: str | None = Field(
        None, description="API base URL of the anthropic classifier (default: ANTHROPIC_BASE_URL)."
    )
    concurrency: int = Field(
        4, ge=1, le=32, description="Requests the anthropic classifier runs at once."
    )
    timeout_seconds: float = Field(
        30.0, gt=0, description="Timeout of one anthropic classifier request, in seconds."
    )
    max_retries: int = Field(
        2, ge=0, le=10, description="Retries of a failed request (429, 5xx, timeout) by the SDK."
    )

    @model_validator(mode="after")
    def _cutoffs_in_order(self) -> CompressWordsOptions:
        if self.mid_calls < self.recent_calls:
            raise ValueError(
                f"mid_calls ({self.mid_calls}) must be >= recent_calls ({self.recent_calls})"
            )
        return self


def is_compressed(text: str) -> bool:
    """True if ``text`` ends with compress_words' marker line."""
    return "[ctx: " in text and _MARK_RE.search(text[-1000:]) is not None


def model_call_ages(conv: Conversation) -> list[int]:
    """For each message, the number of model calls (assistant responses) after it.

    Assistant messages sharing a ``group`` are one response (Claude Code writes one
    record per content block), so they count once.
    """
    starts = sorted(min(r.assistant) for r in conv.rounds())
    return [len(starts) - bisect_right(starts, i) for i in range(len(conv.messages))]


@dataclass
class _Line:
    """One line of a text: verbatim, or its indentation and words with their separators."""

    verbatim: str | None
    indent: str
    words: list[str]
    seps: list[str]


def split_lines(text: str) -> list[_Line]:
    """Cut ``text`` into lines of words; marker lines are kept verbatim."""
    lines: list[_Line] = []
    for raw in text.split("\n"):
        if _PROTECTED_LINE.match(raw):
            lines.append(_Line(raw, "", [], []))
            continue
        stripped = raw.lstrip(" \t")
        indent = raw[: len(raw) - len(stripped)]
        words, seps = [], []
        for m in _WORD.finditer(stripped):
            seps.append(m.group(1))
            words.append(m.group(2))
        lines.append(_Line(None, indent, words, seps))
    return lines


def join_lines(lines: Sequence[_Line], mask: Sequence[bool]) -> str:
    """Rebuild the text keeping the masked words; every line break and indent survives."""
    out: list[str] = []
    pos = 0
    for line in lines:
        if line.verbatim is not None:
            out.append(line.verbatim)
            continue
        parts: list[str] = []
        for word, sep, keep in zip(
            line.words, line.seps, mask[pos : pos + len(line.words)], strict=True
        ):
            if keep:
                parts.append(word if not parts else sep + word)
        pos += len(line.words)
        out.append(line.indent + "".join(parts) if parts else "")
    return "\n".join(out)


def windows_of(words: Sequence[str], size: int) -> list[list[str]]:
    """Consecutive windows of ``size`` words; a short last window joins the one before."""
    windows = [list(words[i : i + size]) for i in range(0, len(words), size)]
    if len(windows) > 1 and len(windows[-1]) < size // 2:
        windows[-2].extend(windows.pop())
    return windows


@dataclass
class _Job:
    ref: BlockRef
    block: Block
    key: str
    ratio: float
    lines: list[_Line]
    words: list[str]
    windows: list[list[str]]


def _make_classifier(conv: Conversation, opts: CompressWordsOptions, ctx: StageContext) -> Any:
    if ctx.classifier is not None:
        return ctx.classifier
    texts = (t for m in conv.messages for t in visible_texts(m))
    agent = (
        b.text
        for m in conv.messages
        if m.role == "assistant"
        for b in m.blocks
        if b.kind in (Kind.TEXT, Kind.TOOL_CALL)
    )
    heuristic = HeuristicClassifier(WordStats.from_texts(texts, agent))
    if opts.classifier == "heuristic":
        return heuristic
    return AnthropicClassifier(
        fallback=heuristic,
        access=ctx.anthropic,
        cache=ctx.answers,
        model=opts.model,
        base_url=opts.base_url,
        concurrency=opts.concurrency,
        timeout_seconds=opts.timeout_seconds,
        max_retries=opts.max_retries,
    )


def _collect(conv: Conversation, opts: CompressWordsOptions, counters: Counter[str]) -> list[_Job]:
    ages = model_call_ages(conv)
    jobs: list[_Job] = []
    for mi, msg in enumerate(conv.messages):
        age = ages[mi]
        if age < opts.recent_calls:
            continue
        # ReasonBlocks' tiers: calls_back < recent is recent, < mid is mid, else old.
        ratio = opts.keep_ratio_mid if age < opts.mid_calls else opts.keep_ratio_old
        if ratio >= 1:
            continue
        for bi, block in enumerate(msg.blocks):
            if block.kind is Kind.TOOL_RESULT:
                key = result_key((mi, bi), block)
            elif (
                block.kind is Kind.TEXT and opts.include_assistant_text and msg.role == "assistant"
            ):
                key = f"text-{msg.key if msg.key is not None else mi}-{bi}"
            else:
                continue
            if is_compressed(block.text):
                counters["already_compressed"] += 1
                continue
            lines = split_lines(block.text)
            words = [w for line in lines for w in line.words]
            if len(words) < opts.min_content_words:
                continue
            windows = windows_of(words, opts.window_words)
            jobs.append(_Job((mi, bi), block, key, ratio, lines, words, windows))
    return jobs


@register("compress_words", options=CompressWordsOptions)
def compress_words(
    conv: Conversation, opts: CompressWordsOptions, ctx: StageContext
) -> StageResult:
    r"""Drop low-information words from older tool outputs, keeping lines and indentation.

    Applies to: tool results (and, with ``include_assistant_text``, assistant text)
    at least ``recent_calls`` model calls old, with at least ``min_content_words``
    words, in every format. Age counts assistant responses after the message;
    records of one response (same ``group``) count once.

    Effect: texts fewer than ``mid_calls`` calls old keep about ``keep_ratio_mid`` of
    their words, older texts ``keep_ratio_old`` (ReasonBlocks' tiers), and never lose a
    protected word: one holding a digit, ``_``, ``/`` or ``\``, a dotted name, an error
    class or an upper-case code (paths, identifiers, numbers, error codes stay even
    past the ratio, whichever classifier runs). Words are judged in windows of
    ``window_words`` by the classifier: ``heuristic`` ranks numbers, paths,
    identifiers, error names, negations and words the agent used first, then the
    words rarest in this transcript; ``anthropic`` asks ``model`` and falls back to
    the heuristic for any window that fails (counted in ``fallbacks``). Only words inside lines go: line
    breaks, indentation and lines written by other ctx stages stay. The text ends
    with ``[ctx: compressed to N% of words; original saved to
    {offload_dir}/compress_words/{id}]``, which holds the original; marked texts are
    skipped, so a rerun changes nothing (a text is compressed once, even when it
    later ages into the old tier).

    Interacts with: run after ``head_tail`` or ``truncate_tool_output`` to compress
    what they kept; their marker lines are never touched. Anthropic answers are
    cached on disk (``CTX_CACHE_DIR``, default ~/.cache/ctx) by window text, keep
    ratio and model, so a rerun makes no request.
    """
    counters: Counter[str] = Counter(
        compressions=0,
        chars_saved=0,
        words_total=0,
        words_kept=0,
        classifier_calls=0,
        cache_hits=0,
        fallbacks=0,
        already_compressed=0,
    )
    jobs = _collect(conv, opts, counters)
    if not jobs:
        return StageResult(conv, dict(counters))
    classifier = _make_classifier(conv, opts, ctx)
    masks = _classify(jobs, classifier)
    changed: dict[BlockRef, Block] = {}
    piece_tokens: dict[str, int] = {}
    for job, mask in zip(jobs, masks, strict=True):
        new_text = _compressed(job, mask, ctx, piece_tokens)
        if new_text is None:
            continue
        changed[job.ref] = job.block.with_text(new_text)
        counters["compressions"] += 1
        counters["chars_saved"] += len(job.block.text) - len(new_text)
        counters["words_total"] += len(job.words)
        counters["words_kept"] += sum(mask)
    notes, fallbacks = _classifier_notes(classifier, counters)
    for note in notes:
        ctx.log(f"compress_words: {note}")
    return StageResult(replace_blocks(conv, changed), dict(counters), notes, fallbacks)


def _classify(jobs: list[_Job], classifier: Any) -> list[list[bool]]:
    """One keep-mask per job, over all its words; jobs of one keep ratio go in one batch."""
    masks: dict[int, list[bool]] = {}
    try:
        for ratio in sorted({j.ratio for j in jobs}):
            group = [i for i, j in enumerate(jobs) if j.ratio == ratio]
            flat = [w for i in group for w in jobs[i].windows]
            results = iter(classify_windows(classifier, flat, ratio))
            for i in group:
                flags = [flag for _ in jobs[i].windows for flag in next(results)]
                # Whatever a classifier answered, protected words stay (is_protected).
                masks[i] = [
                    f or is_protected(w) for f, w in zip(flags, jobs[i].words, strict=False)
                ]
    finally:
        close = getattr(classifier, "close", None)
        if callable(close):
            close()
    return [masks[i] for i in range(len(jobs))]


def _compressed(
    job: _Job, mask: list[bool], ctx: StageContext, piece_tokens: dict[str, int]
) -> str | None:
    """The job's new text (its original offloaded), or None when it would not get shorter."""
    kept = sum(mask)
    if len(mask) != len(job.words) or kept >= len(job.words):
        return None
    counter = ctx.tokens.counter
    count = counter.count
    mark = _MARK.get(ctx.language, _MARK["en"])
    pct = round(100 * kept / len(job.words))
    # Price the result with the path it will get before writing anything, so a
    # text that would not get shorter is never offloaded. Which words a window
    # keeps depends on word counts over the whole transcript, and compressing
    # changes those counts; so the decision uses a bound that depends only on how
    # many words are kept, or a rerun would compress a text this run left alone.
    planned = ctx.offload.path_for(AREA, job.key)
    old_text = job.block.text
    old_tokens = count(old_text)
    tail = count(f"\n{mark.format(pct=pct, path=planned)}")
    by_length = getattr(counter, "by_length", None)
    if by_length is not None:
        # A count of the length alone (approx) is bounded in characters: summing
        # it word by word would round up once per word, and the tier would then
        # compress one text and skip its neighbour of the same size.
        bound = by_length(_body_bound(job, kept, len, {}))
    else:
        bound = _body_bound(job, kept, count, piece_tokens)
    if bound + tail >= old_tokens:
        return None
    body = join_lines(job.lines, mask)
    if count(body) + tail >= old_tokens:  # only if the tokenizer is not subadditive
        return None
    path = ctx.offload.put(AREA, job.key, old_text)
    return f"{body}\n{mark.format(pct=pct, path=path)}"


def _body_bound(job: _Job, kept: int, count: Callable[[str], int], cache: dict[str, int]) -> int:
    """Most ``count`` the compressed body can have when ``kept`` of the job's words stay.

    The body joins its lines with newlines; a line is its indentation and its kept
    words with their separators. Counts of tokens add up at most (a concatenation
    never needs more tokens than its parts), so the sum of the line frames and the
    ``kept`` dearest words bounds every choice of words the classifier could make.
    With ``count = len`` the bound is in characters, and exact for the longest words.
    """

    def tokens(piece: str) -> int:
        if piece not in cache:
            cache[piece] = count(piece)
        return cache[piece]

    frame = max(0, len(job.lines) - 1) * tokens("\n")
    costs: list[int] = []
    for line in job.lines:
        if line.verbatim is not None:
            frame += tokens(line.verbatim)
            continue
        frame += tokens(line.indent) if line.indent else 0
        # A kept word is written with its separator, or without it at a line start.
        costs.extend(
            max(tokens(sep + word), tokens(word)) if sep else tokens(word)
            for word, sep in zip(line.words, line.seps, strict=True)
        )
    return frame + sum(heapq.nlargest(kept, costs))


def _classifier_notes(
    classifier: Any, counters: Counter[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The notes of a classifier run, and the fallbacks among them."""
    if not isinstance(classifier, AnthropicClassifier):
        return (), ()
    counters["classifier_calls"] = classifier.calls
    counters["cache_hits"] = classifier.cache_hits
    counters["fallbacks"] = classifier.fallbacks
    if not classifier.fallbacks:
        return tuple(classifier.notes), ()
    reasons = ", ".join(f"{n} {why}" for why, n in classifier.fallback_reasons.most_common())
    fallback = (
        f"{classifier.fallbacks} windows used the heuristic classifier instead of "
        f"{classifier.model} ({reasons})"
    )
    return (*classifier.notes, fallback), (fallback,)
