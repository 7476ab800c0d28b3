"""The in-process reducer: the chain on every model call, with memory.

An agent loop calls :meth:`Reducer.reduce` with the whole message list before each
model call and sends what it returns. The reducer keeps the decisions it made for the
messages it has seen (see :mod:`ctxcli.pipeline.incremental`), so a message reduced
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ctxcli.core.errors import ConfigError
from ctxcli.formats.anthropic import Anthropic
from ctxcli.formats.format import Format
from ctxcli.formats.openai_chat import OpenAIChat
from ctxcli.formats.openai_responses import OpenAIResponses
from ctxcli.pipeline.config import Config, StageConfig, build_config, default_config
from ctxcli.pipeline.incremental import (
    IncrementOptions,
    PrefixState,
    first_difference,
    run_increment,
)
from ctxcli.pipeline.run import StageReport
from ctxcli.services.counters import get_counter
from ctxcli.stages import StageContext, TokenLedger
from ctxcli.store.live import LiveOffload

__all__ = ["Reducer", "ReducerResult"]

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
    """

    messages: list[dict[str, Any]]
    tokens_before: int
    tokens_after: int
    reused: int
    changed_prefix_at: int | None
    offloaded: list[str]
    stages: list[StageReport] = field(default_factory=list)
    sources: list[int | None] = field(default_factory=list)

    @property
    def tokens_saved(self) -> int:
        """Tokens this call did not send."""
        return self.tokens_before - self.tokens_after


class Reducer:
    """Reduce a growing message list on every model call, keeping earlier decisions.

    Args:
        config: the chain and settings (default: ctx's default chain, or ``preset``).
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
        exact: send on every call what reducing the whole list at once would send
            (the stages' settled decisions are kept, the rest decided again); by
            default earlier decisions are kept for everything already sent, which
            changes the sent prefix less often (better for the prompt cache) but may
            clear less than a full reduction.

    Not thread-safe: use one reducer per conversation (they may share a directory).
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        preset: str | None = None,
        offload_dir: str | os.PathLike[str] | None = None,
        api: Api = "openai_chat",
        tokenizer: str | None = None,
        read_tool: str | None = None,
        keep_originals: bool = True,
        exact: bool = False,
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
        self._exact = exact
        self._system_given = False
        self._sent: list[dict[str, Any]] = []
        self.notes: list[str] = []
        """Warnings the stages left (a classifier falling back, say)."""

    @property
    def offload_dir(self) -> str:
        """The absolute path or URL that hints cite."""
        return self.offload.root

    def reduce(self, messages: Sequence[Mapping[str, Any]], *, system: Any = None) -> ReducerResult:
        """The messages to send for this call, and what reducing them did.

        ``system`` is the Anthropic ``system`` parameter (or an OpenAI system prompt
        kept outside the list); it counts towards the budget and is never changed.

        Raises:
            TranscriptError: a message is not of the reducer's ``api`` shape.
            OffloadError: the offload store cannot be written.
        """
        records: list[Any] = list(messages)
        offset = 0
        if system is not None:
            records.insert(0, {"role": "system", "content": system})
            offset = 1
        ctx = StageContext(
            self._ledger, self.offload, self.config.settings.language, self.notes.append
        )
        options = IncrementOptions(
            index_offset=offset, keep_originals=self._keep_originals, exact=self._exact
        )
        outcome, state = run_increment(
            self._state,
            records,
            fmt=self._format,
            stages=self.config.stages,
            ctx=ctx,
            options=options,
        )
        entries = state.entries
        if offset:
            # The system record is the only entry standing for input 0.
            entries = [e for e in entries if e.anchor != 0]
        sent = [e.data for e in entries]
        changed = first_difference(self._sent, sent)
        if (system is not None) != self._system_given or (offset and outcome.reused == 0):
            changed = 0 if self._sent else None
        self._state, self._sent, self._system_given = state, sent, system is not None
        self._counter.trim(_MEMO_TEXTS)
        return ReducerResult(
            messages=sent,
            tokens_before=outcome.tokens_before,
            tokens_after=outcome.tokens_after,
            reused=max(0, outcome.reused - offset),
            changed_prefix_at=changed,
            offloaded=self.offload.take_written(),
            stages=outcome.stages,
            sources=[None if e.source is None else e.source - offset for e in entries],
        )

    def reset(self) -> None:
        """Forget every decision: the next call starts a new conversation."""
        self._state = PrefixState()
        self._sent = []
        self._system_given = False
        self._ledger.retain(())


def _resolve_config(config: Config | None, preset: str | None) -> Config:
    if preset is None:
        return config if config is not None else default_config()
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
