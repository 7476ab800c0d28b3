"""Referenced-term recall: how much of what the agent went on to use a reduction keeps.

A transcript is cut into a *past* (the first 60% of its messages, the part a
reducer shrinks) and a *future* (the rest). A *referenced term* is an identifier,
path or number of at least 4 characters (:func:`terms`) that occurs in a past tool
output and again in something the agent later wrote: its text or a tool call in
the future. *Recall* is the share of referenced terms still visible anywhere in
the reduced past (any model-visible text: a term the agent itself typed in the
past and a reducer left alone is still there for the model). Tokens saved are
counted with the caller's counter on the past's tool outputs (``tool``) and on
everything model-visible (``context``).

This is the one definition ``make eval``, ``benchmarks/eval_peers.py`` and the
recall floor test (tests/project/test_recall_floor.py) use.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ctxcli.core.model import Conversation, Kind, visible_texts

PAST_SHARE = 0.6

Count = Callable[[str], int]

_TOKEN = re.compile(r"[\w./\\:-]+")
_NAME = re.compile(r"\b[A-Z][a-z]{3,}\b")
_CAMEL = re.compile(r"[a-z][A-Z]")
_DOTTED = re.compile(r"\w\.\w")
_ALNUM = re.compile(r"[A-Za-z0-9_]+")


def terms(text: str) -> set[str]:
    """Identifiers, paths and numbers of at least 4 characters in ``text``.

    A number has 4+ digits and no letter; a path has a slash and a letter; an
    identifier has a letter and an underscore, a camelCase hump, a dot between
    word characters, or a digit.
    """
    found: set[str] = set()
    for raw in _TOKEN.findall(text):
        tok = raw.strip(".:-")
        if len(tok) < 4:
            continue
        digits = sum(c.isdigit() for c in tok)
        letters = sum(c.isalpha() for c in tok)
        is_number = digits >= 4 and letters == 0
        is_path = ("/" in tok or "\\" in tok) and letters > 0
        is_ident = letters > 0 and (
            "_" in tok
            or _CAMEL.search(tok) is not None
            or _DOTTED.search(tok) is not None
            or (digits > 0 and _ALNUM.fullmatch(tok) is not None)
        )
        if is_number or is_path or is_ident:
            found.add(tok)
    return found


def names(text: str) -> set[str]:
    """Capitalised words of at least 4 letters (names, places, commands)."""
    return set(_NAME.findall(text))


def tool_outputs(conv: Conversation) -> list[str]:
    """Texts of every tool result, oldest first."""
    return [b.text for _ref, b in conv.iter_blocks(Kind.TOOL_RESULT)]


def visible(conv: Conversation) -> list[str]:
    """Every model-visible text of ``conv``."""
    return [t for m in conv.messages for t in visible_texts(m)]


def agent_texts(conv: Conversation) -> list[str]:
    """What the agent wrote: assistant text and tool-call arguments."""
    return [
        b.text
        for m in conv.messages
        if m.role == "assistant"
        for b in m.blocks
        if b.kind in (Kind.TEXT, Kind.TOOL_CALL)
    ]


@dataclass(frozen=True)
class Case:
    """One transcript cut into the past a reducer shrinks and the terms its future uses."""

    name: str
    past: Conversation
    referenced: frozenset[str]
    cut: int

    @classmethod
    def split(cls, name: str, conv: Conversation, share: float = PAST_SHARE) -> Case:
        """Cut ``conv`` after ``share`` of its messages."""
        cut = int(len(conv.messages) * share)
        past = conv.with_messages(conv.messages[:cut])
        future = conv.with_messages(conv.messages[cut:])
        used = set().union(*(terms(t) for t in agent_texts(future)))
        return cls(name, past, frozenset(referenced_terms(past, used)), cut)


def referenced_terms(past: Conversation, used: Iterable[str]) -> set[str]:
    """Terms of the past's tool outputs that are in ``used``."""
    return set().union(*(terms(t) for t in tool_outputs(past))) & set(used)


@dataclass(frozen=True)
class Measure:
    """What one reduction of one case cost and kept."""

    tool_before: int
    tool_after: int
    context_before: int
    context_after: int
    referenced: int
    kept: int
    lost: frozenset[str] = frozenset()

    @property
    def tool_saved(self) -> float:
        """Share of the past's tool-output tokens saved."""
        return 1 - self.tool_after / self.tool_before if self.tool_before else 0.0

    @property
    def context_saved(self) -> float:
        """Share of the past's model-visible tokens saved."""
        return 1 - self.context_after / self.context_before if self.context_before else 0.0

    @property
    def recall(self) -> float:
        """Share of referenced terms still visible (1.0 when nothing was referenced)."""
        return self.kept / self.referenced if self.referenced else 1.0


def measure(
    past: Conversation, reduced: Conversation, referenced: Iterable[str], count: Count
) -> Measure:
    """Tokens saved and referenced terms kept when ``past`` became ``reduced``."""
    ref = frozenset(referenced)
    seen = set().union(*(terms(t) for t in visible(reduced)))
    kept = ref & seen
    return Measure(
        tool_before=sum(map(count, tool_outputs(past))),
        tool_after=sum(map(count, tool_outputs(reduced))),
        context_before=sum(map(count, visible(past))),
        context_after=sum(map(count, visible(reduced))),
        referenced=len(ref),
        kept=len(kept),
        lost=ref - kept,
    )


def measure_case(case: Case, reduced: Conversation, count: Count) -> Measure:
    """:func:`measure` for a :class:`Case`."""
    return measure(case.past, reduced, case.referenced, count)
