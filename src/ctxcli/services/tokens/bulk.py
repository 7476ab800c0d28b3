"""Counting many texts fast: each distinct text once, from the disk cache, on every core.

Counting is the expensive part of every run: the rest (parse, stages, dump) runs at
hundreds of MB/s, a BPE tokenizer at 10-60 MB/s. So a :class:`CachedCounter` counts each
distinct text once per run, looks long texts up in the on-disk cache first
(:mod:`ctxcli.services.tokens.count_cache`), and counts what is left of a large input on worker
processes in the background while the stages run (:meth:`CachedCounter.count_many`); a
count that is needed before it is ready is waited for, with this process helping.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

from ctxcli.core.errors import ConfigError
from ctxcli.core.model import TextSpan
from ctxcli.services.tokens.engines import load_engine
from ctxcli.services.tokens.ledger import Progress, Source, read_source

if TYPE_CHECKING:
    from ctxcli.services.tokens.count_cache import TokenCache

__all__ = [
    "CACHE_MIN_CHARS",
    "CachedCounter",
    "DIGEST_MIN_CHARS",
    "Key",
    "PARALLEL_MIN_BYTES",
    "count_texts",
    "default_workers",
    "ignore_sigint",
    "text_key",
]

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
        todo = self._uncounted(texts)
        keys = self._look_up(todo)
        if not todo:
            return
        pending = list(todo.items())
        size = sum(_chars(source) for _, source in pending)
        background = self._background
        if background is None and (self.workers <= 1 or size < self.parallel_min_bytes):
            self._count_now(pending, keys, size, progress)
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

    def _uncounted(self, texts: Iterable[Source]) -> dict[Key, Source]:
        """Return the texts neither known nor being counted, by memo key.

        The texts neither known nor being counted, by memo key (short ones are counted
        at once: cheaper than a lookup).
        """
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
        return todo

    def _look_up(self, todo: dict[Key, Source]) -> dict[Key, bytes]:
        """Take the counts the disk cache holds out of ``todo``; the cache key of each text."""
        if not todo or self.cache is None:
            return {}
        keys = {k: k if isinstance(k, bytes) else text_key(k) for k in todo}
        found = self.cache.get_many(self.name, list(keys.values()))
        if found:
            for key in list(todo):
                n = found.get(keys[key])
                if n is not None:
                    self._memo[key] = n
                    del todo[key]
        return keys

    def _count_now(
        self,
        pending: list[tuple[Key, Source]],
        keys: dict[Key, bytes],
        size: int,
        progress: Progress | None,
    ) -> None:
        """Count ``pending`` in this process, a chunk at a time, into the memo and the cache."""
        fn, done = self._fn, 0
        for start, end, chars in _chunks([_chars(s) for _, s in pending], _CHUNK_BYTES):
            part = pending[start:end]
            counts = [fn(read_source(source)) for _, source in part]
            self._memo.update(zip((k for k, _ in part), counts, strict=True))
            if self.cache is not None:
                self.cache.put_many(
                    self.name, [(keys[k], n) for (k, _), n in zip(part, counts, strict=True)]
                )
            self.counted += len(part)
            done += chars
            if progress is not None:
                progress(done, size)

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
                texts = [read_source(source) for _, source in part]
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
        self._record(fut, [fn(read_source(source)) for _, source in self.futures[fut]])

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
    return [fn(read_source(source)) for source in _SHARED[start:end]]


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
