"""Counters by name: the one place that knows every counter (local BPE, approx, Anthropic API)."""

from __future__ import annotations

from collections.abc import Callable

from ctxcli.services.tokens.anthropic_api import anthropic_counter
from ctxcli.services.tokens.bulk import CachedCounter, default_workers
from ctxcli.services.tokens.count_cache import TokenCache
from ctxcli.services.tokens.engines import approx_of_length, load_engine
from ctxcli.services.tokens.ledger import CountOptions

__all__ = ["get_counter", "open_counter"]


def get_counter(
    name: str,
    *,
    cache: TokenCache | None = None,
    workers: int = 1,
    engine: str | None = None,
) -> CachedCounter:
    """Return the token counter called ``name``.

    Args:
        name: ``cl100k``, ``o200k``, ``approx`` or ``anthropic`` (the API, see
            :mod:`ctxcli.services.tokens.anthropic_api`).
        cache: disk cache of counts from earlier runs (never used for ``approx``).
        workers: processes that may count a large input at once.
        engine: force ``bpe-openai`` or ``tiktoken`` (default: see :func:`load_engine`).

    Raises:
        ConfigError: the name is unknown or its data cannot be loaded offline.
    """
    if name == "anthropic":
        return anthropic_counter(cache)
    label, fn = load_engine(name, engine)
    if name == "approx":
        # Counting is a division: no cache, no workers.
        return CachedCounter(name, fn, engine=label, memoize=False, by_length=approx_of_length)
    return CachedCounter(name, fn, engine=label, cache=cache, workers=workers)


def open_counter(
    name: str, options: CountOptions | None = None, log: Callable[[str], None] | None = None
) -> CachedCounter:
    """A counter for one run, with the disk cache and workers ``options`` ask for.

    Close its ``cache`` when the run is over.
    """
    options = options or CountOptions()
    cache = None
    if options.cache and name != "approx":
        cache = TokenCache.open_default(log)
    workers = options.workers if options.workers is not None else default_workers()
    try:
        return get_counter(name, cache=cache, workers=workers)
    except BaseException:
        if cache is not None:
            cache.close()
        raise
