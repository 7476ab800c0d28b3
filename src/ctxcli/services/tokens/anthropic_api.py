"""Exact Claude token counts from the Anthropic token-counting endpoint (opt-in, network).

``tokenizer = "anthropic"`` asks ``client.messages.count_tokens`` through the official
SDK. The endpoint counts a whole request, so the count of a text is the count of a
one-message request holding it minus that request's fixed overhead, measured once
per run as the count of ``"x"`` minus one (a single character is a single token).

Counts are memoised per run and kept in the token-count disk cache (namespace
``anthropic:<model>``), so a rerun asks only about new texts. Many texts are counted
on a few threads at once; the SDK retries 429/5xx/timeouts itself, and a count that
still fails stops the run with :class:`~ctxcli.core.errors.ClassifierError` (exit 3).

Environment: ``ANTHROPIC_API_KEY`` (required), ``ANTHROPIC_BASE_URL``, and
``CTX_ANTHROPIC_TOKEN_MODEL`` (default ``claude-haiku-4-5``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ctxcli.core.errors import ClassifierError, ConfigError
from ctxcli.services.anthropic_client import (
    DEFAULT_MODEL,
    AnthropicAccess,
    describe_api_error,
    make_client,
)
from ctxcli.services.tokens.bulk import CachedCounter, text_key
from ctxcli.services.tokens.ledger import Progress, Source

if TYPE_CHECKING:
    import anthropic

    from ctxcli.services.tokens.count_cache import TokenCache

__all__ = ["AnthropicCounter", "anthropic_counter"]

_BASELINE_TEXT = "x"
_BASELINE_KEY = text_key("\x00ctx: count_tokens overhead of a one-message request")


class AnthropicCounter(CachedCounter):
    """A token counter backed by the Anthropic count_tokens endpoint."""

    def __init__(
        self,
        access: AnthropicAccess,
        *,
        model: str = DEFAULT_MODEL,
        cache: TokenCache | None = None,
        concurrency: int = 8,
        timeout_seconds: float = 30.0,
        max_retries: int = 2,
    ) -> None:
        super().__init__(f"anthropic:{model}", self._count_one, engine="anthropic-api", cache=cache)
        self.access = access
        self.model = model
        self.concurrency = concurrency
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.requests = 0
        """Requests sent to the endpoint by this counter (tests observe it)."""
        self._overhead: int | None = None
        self._lock = threading.Lock()

    def _client(self) -> anthropic.Anthropic:
        return make_client(
            self.access, timeout_seconds=self.timeout_seconds, max_retries=self.max_retries
        )

    def _raw(self, client: anthropic.Anthropic, text: str) -> int:
        with self._lock:
            self.requests += 1
        try:
            result = client.messages.count_tokens(
                model=self.model, messages=[{"role": "user", "content": text}]
            )
        except Exception as exc:  # one message for every failure after the SDK's retries
            raise ClassifierError(
                f"anthropic token counting failed ({describe_api_error(exc)}, after "
                f'{self.max_retries} retries); retry later, or use tokenizer = "cl100k" '
                "to count offline."
            ) from None
        return int(result.input_tokens)

    def overhead(self, client: anthropic.Anthropic) -> int:
        """Tokens a one-message request costs beyond its text (asked once, then cached)."""
        if self._overhead is None:
            cached = self.cache.get_many(self.name, [_BASELINE_KEY]) if self.cache else {}
            if _BASELINE_KEY in cached:
                self._overhead = cached[_BASELINE_KEY]
            else:
                self._overhead = self._raw(client, _BASELINE_TEXT) - 1
                if self.cache is not None:
                    self.cache.put_many(self.name, [(_BASELINE_KEY, self._overhead)])
        return self._overhead

    def _count_one(self, text: str) -> int:
        with self._client() as client:
            return self._count_with(client, text)

    def _count_with(self, client: anthropic.Anthropic, text: str) -> int:
        if not text:
            return 0
        return max(0, self._raw(client, text) - self.overhead(client))

    def count_many(self, texts: Iterable[Source], progress: Progress | None = None) -> None:
        """Count every text not known yet: disk cache first, then a few requests at once."""
        memo = self._memo
        read = (t if isinstance(t, str) else t.text() for t in texts)
        todo = list(dict.fromkeys(t for t in read if t and t not in memo))
        if not todo:
            return
        keys = {t: text_key(t) for t in todo}
        if self.cache is not None:
            found = self.cache.get_many(self.name, list(keys.values()))
            for text in todo:
                if keys[text] in found:
                    memo[text] = found[keys[text]]
            todo = [t for t in todo if t not in memo]
        if not todo:
            return
        total = sum(map(len, todo))
        done = 0
        with self._client() as client:
            self.overhead(client)  # once, before the threads race to measure it
            with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
                for text, n in zip(
                    todo, pool.map(lambda t: self._count_with(client, t), todo), strict=True
                ):
                    memo[text] = n
                    self.counted += 1
                    done += len(text)
                    if progress is not None:
                        progress(done, total)
        if self.cache is not None:
            self.cache.put_many(self.name, [(keys[t], memo[t]) for t in todo])


def anthropic_counter(
    cache: TokenCache | None = None, env: Mapping[str, str] | None = None
) -> AnthropicCounter:
    """The ``tokenizer = "anthropic"`` counter, configured from the environment.

    Raises:
        ConfigError: ``ANTHROPIC_API_KEY`` is not set.
    """
    env = os.environ if env is None else env
    access = AnthropicAccess.from_env(env)
    if not access.api_key:
        raise ConfigError(
            'tokenizer "anthropic" needs ANTHROPIC_API_KEY in the environment; set it, '
            'or use tokenizer = "cl100k" to count offline.'
        )
    model = env.get("CTX_ANTHROPIC_TOKEN_MODEL") or DEFAULT_MODEL
    return AnthropicCounter(access, model=model, cache=cache)
