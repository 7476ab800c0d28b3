"""The in-process reducer: the chain on every model call, with memory.

An agent loop calls :meth:`Reducer.reduce` with the whole message list before each
model call and sends what it returns. The reducer keeps the decisions it made for the
messages it has seen (see :mod:`ctxcli.pipeline.live_loop`), so a message reduced
once is sent as the same bytes in every later call, and a call costs in proportion to
what is new. Removed texts go to an offload directory (or fsspec URL) that the agent's
read tool can open; the hints cite absolute paths.

Example::

    >>> from ctxcli import Reducer
    >>> reducer = Reducer(preset="eino", offload_dir="/tmp/ctx-offload")
    >>> history = [{"role": "user", "content": "hi"}]
    >>> out = reducer.reduce(history)
    >>> out.messages, out.reused, out.changed_prefix_at
    ([{'role': 'user', 'content': 'hi'}], 0, None)
    >>> history.append({"role": "assistant", "content": "hello"})
    >>> reducer.reduce(history).reused
    1
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ctxcli.agent.prefix_policy import HoldBack, PrefixPolicy
from ctxcli.core.errors import ConfigError
from ctxcli.core.model import Conversation, Message
from ctxcli.formats.anthropic import Anthropic
from ctxcli.formats.format import Format
from ctxcli.formats.lines import Record
from ctxcli.formats.openai_chat import OpenAIChat
from ctxcli.formats.openai_responses import OpenAIResponses
from ctxcli.pipeline.config import Config, StageConfig, build_config
from ctxcli.pipeline.context import stage_context
from ctxcli.pipeline.live_loop import (
    Entry,
    IncrementOptions,
    PrefixState,
    first_difference,
    run_increment,
)
from ctxcli.pipeline.run import StageReport
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import TokenLedger
from ctxcli.store.live import LiveOffload

__all__ = ["PrefixPolicy", "Reducer", "ReducerResult"]

Api = Literal["openai_chat", "anthropic", "openai_responses"]

_FORMATS: dict[str, Format] = {
    "openai_chat": OpenAIChat(),
    "anthropic": Anthropic(),
    "openai_responses": OpenAIResponses(),
}

_MEMO_TEXTS = 20_000
"""Distinct texts whose counts a reducer memoises before it starts over."""


@dataclass(frozen=True)
class ReducerResult:
    """What one :meth:`Reducer.reduce` call returns.

    Attributes:
        messages: what to send; a message reduced once is sent as the same bytes in
            every later call.
        tokens_before: tokens of the messages (and system) as given.
        tokens_after: tokens of what to send.
        reused: leading messages whose decisions were kept from the previous call.
        changed_prefix_at: index of the first message that differs from what the
            previous call sent (None: the provider's prompt-cache prefix stays valid).
        offloaded: paths or URLs written in this call.
        stages: what each stage did in this call.
        sources: for each message sent, the index of the given message it stands
            for (None for a message a stage created, a summary say).
        held_back: the chain proposed a change to messages already sent and the
            prefix policy kept them as sent (the change did not pay yet).
        cache_breakpoint: index of the message before the rounds of tool use the
            chain keeps, where the chain's next change will start: a ``cache_control``
            breakpoint on it (besides the one on the last message) lets the provider
            read everything before that change from its cache (see
            :class:`~ctxcli.agent.prefix_policy.PrefixPolicy` ``marked``). None
            before there are such rounds.
    """

    messages: list[dict[str, Any]]
    tokens_before: int
    tokens_after: int
    reused: int
    changed_prefix_at: int | None
    offloaded: list[str]
    stages: list[StageReport] = field(default_factory=list)
    sources: list[int | None] = field(default_factory=list)
    held_back: bool = False
    cache_breakpoint: int | None = None

    @property
    def tokens_saved(self) -> int:
        """Tokens this call did not send."""
        return self.tokens_before - self.tokens_after


class Reducer:
    """Reduce a growing message list on every model call, keeping earlier decisions.

    Args:
        config: the chain and settings, a :class:`Config` or a dict shaped like
            ``ctx.toml`` (default: the ``live`` preset, the chain chosen by the
            prompt-cache bill, or ``preset``).
        preset: a shipped chain (``ctx presets``); with ``config``, it replaces the
            config's chain and keeps its other settings.
        offload_dir: where removed texts go: a directory (default: the config's
            ``offload_dir``, else ``./ctx-offload``) or an fsspec URL.
        api: the shape of the message dicts: OpenAI chat, Anthropic Messages, or
            OpenAI Responses input items (``openai_responses``, the Agents SDK's).
        tokenizer: overrides the config's tokenizer (``cl100k``, ``o200k``, ``approx``).
        read_tool: the name of the agent's tool that reads offloaded files; hints name
            it and results of that tool reading an offloaded file are never truncated.
        keep_originals: keep a copy of the messages as given, so the next call finds the
            shared prefix by comparing them (fast); False keeps only their digests and
            what was sent (less memory: a long-lived proxy), and hashes every message
            on each call instead.
        prefix_policy: when a message already sent may change. Earlier decisions are
            kept for everything already sent, and the chain runs again over that; when
            it proposes to change a sent message (a budget crossed again, say), the
            change busts the provider's prompt cache. ``"auto"`` (default) makes it only
            when it pays (:class:`~ctxcli.agent.prefix_policy.PrefixPolicy` for the
            ``api``: Anthropic's or OpenAI's cache prices), and holds it back
            otherwise; a :class:`PrefixPolicy` says how; None makes every change at
            once; ``"exact"`` sends on every call what reducing the whole list at once
            would send (the stages' settled decisions kept, the rest decided again).

    Not thread-safe: use one reducer per conversation (they may share a directory).
    """

    def __init__(
        self,
        config: Config | Mapping[str, Any] | None = None,
        *,
        preset: str | None = None,
        offload_dir: str | os.PathLike[str] | None = None,
        api: Api = "openai_chat",
        tokenizer: str | None = None,
        read_tool: str | None = None,
        keep_originals: bool = True,
        prefix_policy: PrefixPolicy | Literal["auto", "exact"] | None = "auto",
    ) -> None:
        if api not in _FORMATS:
            raise ConfigError(
                f"api {api!r} is not supported; use one of {', '.join(sorted(_FORMATS))}."
            )
        config = _resolve_config(config, preset)
        if tokenizer is not None:
            config = config.with_overrides(tokenizer=tokenizer)
        if read_tool is not None:
            config = _with_read_tool(config, read_tool)
        self.config = config
        self.api: Api = api
        self._format = _FORMATS[api]
        location = offload_dir if offload_dir is not None else config.settings.offload_dir
        self.offload = LiveOffload(location if location is not None else "ctx-offload")
        self._counter = get_counter(config.settings.tokenizer)
        self._ledger = TokenLedger(self._counter)
        self._state = PrefixState()
        self._keep_originals = keep_originals
        self._exact = prefix_policy == "exact"
        policy = PrefixPolicy.for_api(api) if prefix_policy == "auto" else prefix_policy
        self._hold = HoldBack(policy) if isinstance(policy, PrefixPolicy) else None
        self._keep_rounds = _kept_rounds(config)
        self._system_given = False
        self._sent: list[dict[str, Any]] = []
        self.notes: list[str] = []
        """Warnings the stages left (a classifier falling back, say)."""
        # What a stage gets here is what it gets reducing a file (API access, the
        # answer cache): one factory builds both.
        self._context = stage_context(
            self._ledger, self.offload, language=config.settings.language, log=self.notes.append
        )

    @property
    def offload_dir(self) -> str:
        """The absolute path or URL that hints cite."""
        return self.offload.root

    def reduce(
        self, messages: Sequence[Mapping[str, Any]], *, system: Any = None, at: float | None = None
    ) -> ReducerResult:
        """The messages to send for this call, and what reducing them did.

        ``system`` is the Anthropic ``system`` parameter (or an OpenAI system prompt
        kept outside the list); it counts towards the budget and is never changed.
        ``at`` is when the call is made, in seconds (default: now): the prefix policy
        knows from it whether the provider's cache is still warm.

        Raises:
            TranscriptError: a message is not of the reducer's ``api`` shape.
            OffloadError: the offload store cannot be written.
        """
        records: list[Any] = list(messages)
        offset = 0
        if system is not None:
            records.insert(0, {"role": "system", "content": system})
            offset = 1
        options = IncrementOptions(
            index_offset=offset, keep_originals=self._keep_originals, exact=self._exact
        )
        outcome, state = run_increment(
            self._state,
            records,
            fmt=self._format,
            stages=self.config.stages,
            ctx=self._context,
            options=options,
        )
        now = time.time() if at is None else at
        held = self._hold_back(state, outcome.reused, offset, now)
        if held is not None:
            state = held
        entries = state.entries
        if offset:
            # The system record is the only entry standing for input 0.
            entries = [e for e in entries if e.anchor != 0]
        sent = [e.data for e in entries]
        changed = first_difference(self._sent, sent)
        if (system is not None) != self._system_given or (offset and outcome.reused == 0):
            changed = 0 if self._sent else None
        mark, ends = self._breakpoints(entries)
        if self._hold is not None:
            self._hold.sent(now, changed, ends)
        self._state, self._sent, self._system_given = state, sent, system is not None
        self._counter.trim(_MEMO_TEXTS)
        return ReducerResult(
            messages=sent,
            tokens_before=outcome.tokens_before,
            tokens_after=sum(self._tokens(e) for e in state.entries),
            reused=max(0, outcome.reused - offset),
            changed_prefix_at=changed,
            offloaded=self.offload.take_written(),
            stages=outcome.stages,
            sources=[None if e.source is None else e.source - offset for e in entries],
            held_back=held is not None,
            cache_breakpoint=mark,
        )

    def _hold_back(
        self, candidate: PrefixState, shared: int, offset: int, now: float
    ) -> PrefixState | None:
        """Fall back to what was sent before when the candidate's change does not pay.

        What was sent before plus the candidate's new part, when the candidate's
        change to the sent prefix does not pay (None: send the candidate).
        """
        hold, old = self._hold, self._state
        if hold is None or self._exact or not old.entries:
            return None
        new = [e for e in candidate.entries if not (offset and e.anchor == 0)]
        changed = first_difference(self._sent, [e.data for e in new])
        if changed is None:
            return None
        # The client changed its own history, or the cache expired: nothing to keep.
        if shared < len(old.chain) or hold.is_cold(now):
            return None
        spliced = _splice(old, candidate, shared)
        # (The system record, if any, is in both and cancels out.)
        reclaimed = sum(map(self._tokens, spliced.entries)) - sum(
            map(self._tokens, candidate.entries)
        )
        _, ends = self._breakpoints(new)
        blocks = [len(e.message.blocks) if e.message is not None else 1 for e in new]
        start = hold.cached_until(changed, blocks, ends)
        before = [e for e in old.entries if not (offset and e.anchor == 0)]
        rewritten = sum(self._tokens(e) for e in before[start:])
        whole = start == 0
        if hold.accept(reclaimed_tokens=reclaimed, rewritten_tokens=rewritten, whole=whole):
            return None
        self._ledger.retain([e.message for e in spliced.entries if e.message is not None])
        return spliced

    def _breakpoints(self, entries: Sequence[Entry]) -> tuple[int | None, list[int]]:
        """Choose the breakpoint to suggest and list the prefixes a call leaves cached.

        The message to suggest for a breakpoint, and the prefixes (in messages) a
        call sending ``entries`` leaves cached: the whole, and the suggested one when
        the caller marks it (``PrefixPolicy.marked``).
        """
        mark = _window_mark(entries, self._format.name, self._keep_rounds)
        marked = self._hold is not None and self._hold.policy.marked and mark is not None
        return mark, [len(entries)] + ([mark + 1] if marked and mark is not None else [])

    def _tokens(self, entry: Entry) -> int:
        return self._ledger.message(entry.message) if entry.message is not None else 0

    def reset(self) -> None:
        """Forget every decision: the next call starts a new conversation."""
        self._state = PrefixState()
        self._sent = []
        self._system_given = False
        if self._hold is not None:
            self._hold.reset()


def _kept_rounds(config: Config) -> int:
    """Rounds of tool use the chain keeps as they are (the largest ``keep_rounds``)."""
    kept = [getattr(sc.options, "keep_rounds", 0) for sc in config.stages]
    return max([k for k in kept if isinstance(k, int)], default=0) or 1


def _window_mark(entries: Sequence[Entry], fmt: str, keep_rounds: int) -> int | None:
    """Index (in ``entries``) of the last entry before the last ``keep_rounds`` rounds."""
    at: list[int] = []
    messages: list[Message] = []
    for i, entry in enumerate(entries):
        if entry.message is not None:
            at.append(i)
            messages.append(entry.message)
    rounds = Conversation(tuple(messages), fmt).tool_rounds()
    if len(rounds) < keep_rounds:
        return None
    first = at[rounds[-keep_rounds].first]
    return first - 1 if first > 0 else None


def _splice(old: PrefixState, candidate: PrefixState, shared: int) -> PrefixState:
    """Keep ``old``'s entries for the records both calls share.

    ``candidate`` with the entries of the first ``shared`` input records as ``old``
    sent them: its decisions for the new records, the old ones for the rest.
    """
    entries: list[Entry] = list(old.kept_entries(shared))
    for entry in candidate.entries:
        if entry.anchor < shared:
            continue  # the candidate's change to the sent prefix, held back
        pos = len(entries)
        rec = entry.record
        if rec.line != pos + 1:  # moved: the candidate dropped or added a message before it
            msg: Message | None = rec.message
            rec = Record(b"", pos + 1, rec.data)
            rec.message = None if msg is None else replace(msg, key=pos)
        entries.append(Entry(rec, entry.anchor, entry.created))
    return replace(candidate, entries=entries, settled=None)


LIVE_PRESET = "live"
"""The chain a reducer runs when given none: the one the prompt-cache bill chose."""


def _resolve_config(config: Config | Mapping[str, Any] | None, preset: str | None) -> Config:
    if isinstance(config, Mapping):
        # Through the one loader, as the datasets' calls take a dict.
        config = build_config(dict(config), "Reducer config")
    elif config is not None and not isinstance(config, Config):
        raise ConfigError(
            f"Reducer config: {type(config).__name__} is not a configuration; pass a Config "
            "(load_config) or a dict shaped like ctx.toml."
        )
    if preset is None:
        if config is not None:
            return config
        preset = LIVE_PRESET
    settings: dict[str, Any] = {}
    if config is not None:
        settings = config.settings.model_dump(exclude_unset=True, exclude={"preset"})
    return build_config({**settings, "preset": preset}, f"preset {preset}")


def _with_read_tool(config: Config, read_tool: str) -> Config:
    """The config with ``read_tool_name`` set on every stage that has the option."""
    stages: list[StageConfig] = []
    for sc in config.stages:
        if "read_tool_name" in type(sc.options).model_fields:
            sc = replace(sc, options=sc.options.model_copy(update={"read_tool_name": read_tool}))
        stages.append(sc)
    return replace(config, stages=tuple(stages))
