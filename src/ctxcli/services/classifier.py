"""Word classifiers for compress_words: which words of a window to keep.

A :class:`Classifier` answers ``keep_mask(words, keep_ratio)`` for one window of
words. Two ship with ctx:

- :class:`HeuristicClassifier` (default, offline): ranks words by self-information
  estimated from the transcript's own word frequencies (frequent filler is cheap),
  with large bonuses for words that carry information (numbers, paths, identifiers,
  error names, negations) and for words the agent itself used, and keeps the best
  ``keep_ratio`` of each window, so the ratio is met.
- :class:`AnthropicClassifier`: asks a small Claude model to label numbered words
  (an LLMLingua-2 style prompt) through the official SDK, a window per request, with
  bounded concurrency, timeouts and the SDK's retries. Any failed window falls back
  to the heuristic and is counted; successful answers are cached on disk so a rerun
  makes no request.

The disk cache (:mod:`ctxcli.services.answer_cache`) and the API access
(:mod:`ctxcli.services.anthropic_client`) are created by the one stage-context factory
(:func:`ctxcli.pipeline.context.stage_context`) and reach the stage as ``ctx.answers`` and
``ctx.anthropic`` (stages do no I/O of their own).
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ctxcli.services.answer_cache import AnswerCache, digest
from ctxcli.services.anthropic_client import (
    DEFAULT_MODEL,
    AnthropicAccess,
    ReplyError,
    describe_api_error,
    make_client,
)

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "AnthropicClassifier",
    "Classifier",
    "HeuristicClassifier",
    "INFORMATIVE_BONUS",
    "LITERAL_BONUS",
    "MENTIONED_BONUS",
    "PROMPT_VERSION",
    "PROPER_NOUN_BONUS",
    "REPEAT_PENALTY",
    "WordStats",
    "build_prompt",
    "classify_windows",
    "is_informative",
    "is_protected",
    "normalise_word",
    "parse_reply",
]

PROMPT_VERSION = "keep-indices-v1"


@runtime_checkable
class Classifier(Protocol):
    """Decides which words of a window to keep."""

    name: str

    def keep_mask(self, words: Sequence[str], keep_ratio: float) -> list[bool]:
        """One flag per word: True keeps it. About ``keep_ratio`` of the words are kept."""
        ...


def classify_windows(
    classifier: Classifier, windows: Sequence[Sequence[str]], keep_ratio: float
) -> list[list[bool]]:
    """Masks for many windows at once (classifiers with a batch method run it concurrently)."""
    batch = getattr(classifier, "keep_masks", None)
    if callable(batch):
        masks: list[list[bool]] = batch(windows, keep_ratio)
        return masks
    return [classifier.keep_mask(w, keep_ratio) for w in windows]


# -- the offline heuristic ------------------------------------------------------------

# Stripped before a word is judged, so "done." is a plain word and "setup.py" is not.
# Angle brackets stay: "<output>" is markup worth keeping.
_EDGE_PUNCT = "\"'`()[]{},;:.!?*"
_SENTENCE_END = (".", "!", "?")

# Bonuses and penalty in bits, on top of self-information (which runs ~5-20 bits).
INFORMATIVE_BONUS = 12.0
"""A number, path, identifier, error name or negation."""
MENTIONED_BONUS = 8.0
"""A word the agent itself wrote (in its text or tool-call arguments)."""
PROPER_NOUN_BONUS = 6.0
"""A capitalised word inside a sentence: a name, most likely."""
LITERAL_BONUS = 4.0
"""A quoted value such as ``"Omar",`` (not a ``"key":``)."""
REPEAT_PENALTY = 16.0
"""A word already seen earlier in the same window says little new."""
_INFO_CHARS = frozenset("_/\\=<>.:")
_DIGIT = re.compile(r"\d")
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z][a-z]+[A-Z]|^[A-Z]{2,}[a-z]*$")
_ERROR_NAME = re.compile(
    r"(?i)(error|exception|warning|traceback|fail|fatal|panic|denied|refused|timeout|"
    r"invalid|missing|abort)"
)
_NEGATIONS = frozenset(
    "not no never none nothing nobody neither nor cannot can't don't doesn't didn't isn't "
    "aren't wasn't weren't won't wouldn't shouldn't couldn't without".split()
)


def normalise_word(word: str) -> str:
    """The word as frequency tables see it: lower case, edge punctuation stripped."""
    return word.strip(_EDGE_PUNCT).lower()


def is_informative(word: str) -> bool:
    """True for words that carry facts: numbers, paths, identifiers, error names, negations.

    Edge punctuation is ignored, so ``done.`` is a plain word but ``setup.py`` and
    ``a.b:c`` are identifiers.
    """
    core = word.strip(_EDGE_PUNCT)
    if not core:
        return False
    if _DIGIT.search(core) or any(c in _INFO_CHARS for c in core):
        return True
    if _CAMEL.search(core) or _ERROR_NAME.search(core):
        return True
    return core.lower() in _NEGATIONS


_PROTECTED = re.compile(
    r"\d"  # a number, a version, a line number, an error code such as E501 or 0x80004005
    r"|[_/\\]"  # snake_case, a path
    r"|\w\.\w"  # a dotted name: setup.py, os.path.join
    r"|^[A-Z][A-Za-z]*(?:Error|Exception|Warning)$"  # an error class
    r"|^[A-Z]{3,}$"  # an error or status code: ENOENT, EACCES, FAILED
)


def is_protected(word: str) -> bool:
    """True for words no classifier may drop: paths, identifiers, numbers, error codes.

    That is any word (edge punctuation stripped) holding a digit, an underscore, a
    slash or backslash, a dot between word characters, an error class name
    (``KeyError``) or an upper-case code of three letters or more (``ENOENT``).
    These are what an agent copies into its next command; dropping one breaks it.
    """
    core = word.strip(_EDGE_PUNCT)
    return bool(core) and _PROTECTED.search(core) is not None


@dataclass
class WordStats:
    """What the heuristic knows about one transcript.

    ``counts`` are the normalised word frequencies of every visible text (for
    self-information); ``mentioned`` are the words the agent itself wrote in its
    text or tool-call arguments: a term the agent used is a term it may use again.
    """

    counts: Counter[str] = field(default_factory=Counter)
    total: int = 0
    mentioned: frozenset[str] = frozenset()

    @classmethod
    def from_texts(cls, texts: Iterable[str], agent_texts: Iterable[str] = ()) -> WordStats:
        """Count the normalised words of ``texts``; remember those of ``agent_texts``."""
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(normalise_word(w) for w in text.split())
        counts.pop("", None)
        mentioned = {normalise_word(w) for text in agent_texts for w in text.split()}
        mentioned.discard("")
        return cls(counts, sum(counts.values()), frozenset(mentioned))

    def self_information(self, word: str) -> float:
        """``-log2 p(word)`` with add-one smoothing: rare words score high."""
        key = normalise_word(word)
        if not key:
            return 0.0  # pure punctuation: the cheapest thing to drop
        vocabulary = len(self.counts) + 1
        p = (self.counts.get(key, 0) + 1) / (self.total + vocabulary)
        return -math.log2(p)


class HeuristicClassifier:
    """Ranks words by what they are worth and keeps the best ``keep_ratio`` of each window.

    A word's worth is its self-information in this transcript (frequent filler is
    cheap), plus bonuses for informative words (numbers, paths, identifiers, error
    names, negations), words the agent itself used, names and quoted values, minus a
    penalty for a repeat earlier in the same window. Informative words therefore go
    last, but they do go when a window holds little else: the keep ratio is met.
    """

    name = "heuristic"

    def __init__(self, stats: WordStats | None = None) -> None:
        self.stats = stats or WordStats()

    def keep_mask(self, words: Sequence[str], keep_ratio: float) -> list[bool]:
        """Keep every protected word, then the best others up to ``round(keep_ratio * n)``.

        At least one word is kept; protected words (:func:`is_protected`) stay even
        when they alone exceed the ratio.
        """
        n = len(words)
        if not n:
            return []
        target = min(n, max(1, round(keep_ratio * n)))
        seen: set[str] = set()
        scores: list[float] = []
        for i, word in enumerate(words):
            key = normalise_word(word)
            score = self.score(word, words[i - 1] if i else None)
            if key in seen:
                score -= REPEAT_PENALTY
            seen.add(key)
            scores.append(score)
        # Highest score first; earlier words win ties so the output is stable.
        order = sorted(range(n), key=lambda i: (-scores[i], i))
        mask = [is_protected(w) for w in words]
        room = target - sum(mask)
        for i in order:
            if room <= 0:
                break
            if not mask[i]:
                mask[i] = True
                room -= 1
        return mask

    def score(self, word: str, previous: str | None) -> float:
        """How much ``word`` is worth keeping, in bits (``previous`` gives context)."""
        bits = self.stats.self_information(word)
        key = normalise_word(word)
        if is_informative(word):
            bits += INFORMATIVE_BONUS
        if key and key in self.stats.mentioned:
            bits += MENTIONED_BONUS
        core = word.strip(_EDGE_PUNCT)
        if core[:1].isupper() and previous is not None and not previous.endswith(_SENTENCE_END):
            bits += PROPER_NOUN_BONUS
        if word[:1] in "\"'" and not word.rstrip(",;]}").endswith(":"):
            bits += LITERAL_BONUS
        return bits


_SYSTEM = """\
You compress text for another language model, like LLMLingua-2: you label words KEEP or DROP.
The words come from a tool output that an AI agent read earlier in its work. Keep the words the
agent may still need to recover every fact: names, identifiers, file paths, numbers, error
messages, negations and results. Drop filler, boilerplate and words that are easy to infer.
Keep about {pct}% of the words ({target} of {n}).
Reply with only a JSON array of the indices of the words to KEEP, in increasing order, for
example [0, 2, 3]. No other text."""


def build_prompt(words: Sequence[str], keep_ratio: float) -> tuple[str, str]:
    """The system prompt and the numbered-words user message for one window."""
    n = len(words)
    target = min(n, max(1, round(keep_ratio * n)))
    system = _SYSTEM.format(pct=round(100 * keep_ratio), target=target, n=n)
    user = "\n".join(f"{i}\t{w}" for i, w in enumerate(words))
    return system, user


def parse_reply(text: str, n: int) -> list[bool]:
    """Turn the model's reply into a mask of ``n`` flags.

    Accepts a JSON array of KEEP indices (the asked-for shape) or, leniently, an
    array of ``n`` labels ("KEEP"/"DROP" or booleans).

    Raises:
        ReplyError: no JSON array, an index out of range, labels of the wrong
            length, or nothing kept.
    """
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end < start:
        raise ReplyError("unparseable reply")
    try:
        items = json.loads(text[start : end + 1])
    except ValueError:
        raise ReplyError("unparseable reply") from None
    if not isinstance(items, list):
        raise ReplyError("unparseable reply")
    if items and all(isinstance(x, bool) or isinstance(x, str) for x in items):
        if len(items) != n:
            raise ReplyError("wrong length")
        mask = [x is True or (isinstance(x, str) and x.strip().upper() == "KEEP") for x in items]
    elif all(isinstance(x, int) and not isinstance(x, bool) for x in items):
        if any(not 0 <= x < n for x in items):
            raise ReplyError("wrong length")
        keep = set(items)
        mask = [i in keep for i in range(n)]
    else:
        raise ReplyError("unparseable reply")
    if not any(mask):
        raise ReplyError("kept nothing")
    return mask


class AnthropicClassifier:
    """Labels words with a Claude model; falls back to another classifier per window.

    Counters (read them after a run): ``calls`` windows sent to the API,
    ``cache_hits`` windows answered from the cache, ``fallbacks`` windows the
    fallback classifier answered, ``fallback_reasons`` why.
    """

    name = "anthropic"
    NAMESPACE = "compress_words"

    def __init__(
        self,
        *,
        fallback: Classifier,
        access: AnthropicAccess | None = None,
        cache: AnswerCache | None = None,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        concurrency: int = 4,
        timeout_seconds: float = 30.0,
        max_retries: int = 2,
    ) -> None:
        self.fallback = fallback
        self.access = access or AnthropicAccess()
        self.cache = cache
        self.model = model
        self.base_url = base_url
        self.concurrency = concurrency
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.calls = 0
        self.cache_hits = 0
        self.fallbacks = 0
        self.fallback_reasons: Counter[str] = Counter()
        self.notes: list[str] = []
        self._client: anthropic.Anthropic | None = None
        self._client_lock = threading.Lock()

    def keep_mask(self, words: Sequence[str], keep_ratio: float) -> list[bool]:
        """The mask of one window (see :meth:`keep_masks`)."""
        return self.keep_masks([words], keep_ratio)[0]

    def keep_masks(self, windows: Sequence[Sequence[str]], keep_ratio: float) -> list[list[bool]]:
        """Masks for all windows: cache first, then concurrent requests, then fallback."""
        keys = [
            digest(PROMPT_VERSION, self.model, f"{keep_ratio:.4f}", "\x1f".join(w)) for w in windows
        ]
        cached = self.cache.get_many(self.NAMESPACE, sorted(set(keys))) if self.cache else {}
        masks: list[list[bool] | None] = [None] * len(windows)
        todo: list[int] = []
        for i, key in enumerate(keys):
            hit = cached.get(key)
            if isinstance(hit, list) and len(hit) == len(windows[i]):
                masks[i] = [bool(x) for x in hit]
                self.cache_hits += 1
            else:
                todo.append(i)
        if todo and not self.access.api_key:
            self._note(
                "ANTHROPIC_API_KEY is not set, so the anthropic classifier used the offline "
                'heuristic instead; set the key, or use classifier = "heuristic" to silence this'
            )
            for i in todo:
                masks[i] = self._fall_back(windows[i], keep_ratio, "no API key")
            todo = []
        if todo:
            fresh: dict[str, list[bool]] = {}
            with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
                futures = {i: pool.submit(self._ask, windows[i], keep_ratio) for i in todo}
                self.calls += len(todo)
                for i, future in futures.items():
                    try:
                        mask = future.result()
                    except Exception as exc:  # any failure of one window: that window falls back
                        masks[i] = self._fall_back(windows[i], keep_ratio, describe_api_error(exc))
                        continue
                    masks[i] = mask
                    fresh[keys[i]] = mask
            if self.cache is not None:
                self.cache.put_many(self.NAMESPACE, fresh)
                if self.cache.problem:
                    self._note(self.cache.problem)
        return [m if m is not None else [] for m in masks]

    def close(self) -> None:
        """Close the HTTP client, if one was opened."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _fall_back(self, words: Sequence[str], keep_ratio: float, reason: str) -> list[bool]:
        self.fallbacks += 1
        self.fallback_reasons[reason] += 1
        return self.fallback.keep_mask(words, keep_ratio)

    def _client_once(self) -> anthropic.Anthropic:
        # Created lazily so a run answered wholly from the cache opens no connection;
        # the SDK client itself is safe to share between the worker threads.
        with self._client_lock:
            if self._client is None:
                self._client = make_client(
                    self.access,
                    base_url=self.base_url,
                    timeout_seconds=self.timeout_seconds,
                    max_retries=self.max_retries,
                )
            return self._client

    def _ask(self, words: Sequence[str], keep_ratio: float) -> list[bool]:
        system, user = build_prompt(words, keep_ratio)
        reply = self._client_once().messages.create(
            model=self.model,
            max_tokens=32 + 4 * len(words),
            system=system,
            messages=[{"role": "user", "content": user}],
        )
        text = "".join(getattr(block, "text", "") for block in reply.content)
        mask = parse_reply(text, len(words))
        # Numbers, paths and identifiers stay even if the model dropped them: the
        # cheapest insurance against losing a fact (they are few in prose windows).
        return [m or is_informative(w) for m, w in zip(mask, words, strict=True)]
