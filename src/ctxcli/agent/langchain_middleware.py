"""LangChain v1 middleware: ctx's chain on every model call of a ``create_agent`` loop.

``pip install 'ctx-lossless[langchain]'``, then::

    from langchain.agents import create_agent
    from ctxcli.agent.langchain_middleware import CtxMiddleware

    agent = create_agent(model, tools, middleware=[CtxMiddleware(preset="eino")])

The middleware works like LangChain's own ``ContextEditingMiddleware``: it edits the
request the model receives (``wrap_model_call``) and leaves the graph state, the full
history, untouched. Unlike it, what it removes is written to an offload directory and
the hint names the file; the middleware registers a ``ctx_read(path, offset, limit)``
tool with which the agent reads it back. Decisions are kept per conversation (per
LangGraph ``thread_id``), so a tool result reduced once is sent as the same text on
every later call and a call costs in proportion to what is new.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.tools import BaseTool, StructuredTool

from ctxcli.agent.reducer import Reducer, ReducerResult
from ctxcli.core.errors import CtxError
from ctxcli.pipeline.config import Config
from ctxcli.pipeline.live_loop import record_digest
from ctxcli.store.live import LiveOffload

__all__ = ["CtxMiddleware", "LangChainSession", "ctx_read_tool", "reduce_messages"]

READ_TOOL = "ctx_read"


def ctx_read_tool(offload: LiveOffload, name: str = READ_TOOL) -> BaseTool:
    """The tool an agent calls to read back what ctx offloaded (confined to ``offload``)."""

    def ctx_read(path: str, offset: int = 0, limit: int = 200) -> str:
        try:
            return offload.read_window(path, offset, limit)
        except CtxError as exc:
            return f"error: {exc}"

    return StructuredTool.from_function(
        ctx_read,
        name=name,
        description=(
            "Read a file that ctx saved when it shortened the conversation: the path "
            "named in a '[ctx: ...]' note. offset is the first line (0-based), limit the "
            "number of lines."
        ),
    )


class CtxMiddleware(AgentMiddleware):
    """Run a ctx chain on the messages of every model call.

    Args:
        config: the chain and settings (default: ctx's default chain, or ``preset``).
        preset: a shipped chain such as ``"eino"``.
        offload_dir: where removed texts go (a directory or an fsspec URL).
        tokenizer: overrides the config's token counter.
        max_conversations: decisions are kept for this many threads (least recently
            used ones are forgotten; they are then recomputed, never lost).
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        preset: str | None = None,
        offload_dir: str | os.PathLike[str] | None = None,
        tokenizer: str | None = None,
        max_conversations: int = 64,
    ) -> None:
        super().__init__()
        first = Reducer(
            config, preset=preset, offload_dir=offload_dir, tokenizer=tokenizer, read_tool=READ_TOOL
        )
        self.config = first.config
        self.offload = first.offload
        self.max_conversations = max(1, max_conversations)
        self._lock = threading.Lock()
        self._spare: Reducer | None = first
        self._sessions: OrderedDict[str, LangChainSession] = OrderedDict()
        self.tools = [ctx_read_tool(self.offload)]
        self.results: list[ReducerResult] = []
        """What each model call's reduction did, oldest first (the last 100)."""

    @property
    def offload_dir(self) -> str:
        """The absolute path or URL that hints cite and ``ctx_read`` reads from."""
        return self.offload.root

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        """Reduce the request's messages, then call the model."""
        return handler(self.reduce_request(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        """Reduce the request's messages, then call the model (async)."""
        return await handler(self.reduce_request(request))

    def reduce_request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request with its messages reduced (the state is left as it is)."""
        if not request.messages:
            return request
        system = None
        if request.system_message is not None:
            system = convert_to_openai_messages([request.system_message])[0]["content"]
        thread = _thread_id()
        if not thread:
            # No checkpointer: tell conversations apart by how they start.
            first = convert_to_openai_messages([request.messages[0]])[0]
            thread = record_digest(b"langchain", [system, first]).hex()
        # One reduction at a time: a session's memory is not thread-safe, and a call
        # takes milliseconds.
        with self._lock:
            messages, out = self.session(thread).reduce(request.messages, system)
            self.results.append(out)
            del self.results[:-100]
        return request.override(messages=messages)

    def session(self, thread: str = "") -> LangChainSession:
        """The memory of one conversation: a LangGraph thread, or how a conversation starts."""
        session = self._sessions.get(thread)
        if session is None:
            reducer, self._spare = self._spare, None
            if reducer is None:
                reducer = Reducer(self.config, offload_dir=self.offload.root)
            session = LangChainSession(reducer)
            self._sessions[thread] = session
            while len(self._sessions) > self.max_conversations:
                self._sessions.popitem(last=False)
        self._sessions.move_to_end(thread)
        return session


class LangChainSession:
    """One conversation's reducer, with the conversions to and from dicts memoised.

    LangChain keeps its messages as the same objects from call to call, and the
    reducer sends a kept message as the same dict, so both conversions are looked up
    by identity and only new messages are converted.
    """

    def __init__(self, reducer: Reducer) -> None:
        self.reducer = reducer
        self._dicts: dict[int, tuple[BaseMessage, dict[str, Any]]] = {}
        self._back: dict[int, tuple[dict[str, Any], BaseMessage, AnyMessage]] = {}

    def reduce(
        self, messages: Sequence[AnyMessage], system: Any = None
    ) -> tuple[list[AnyMessage], ReducerResult]:
        """The messages to send, and what reducing them did."""
        dicts: list[dict[str, Any]] = []
        memo: dict[int, tuple[BaseMessage, dict[str, Any]]] = {}
        todo = [m for m in messages if self._dicts.get(id(m), (None,))[0] is not m]
        fresh = iter(convert_to_openai_messages(todo)) if todo else iter(())
        for m in messages:
            hit = self._dicts.get(id(m))
            data = hit[1] if hit is not None and hit[0] is m else next(fresh)
            memo[id(m)] = (m, data)
            dicts.append(data)
        self._dicts = memo
        out = self.reducer.reduce(dicts, system=system)
        reduced: list[AnyMessage] = []
        back: dict[int, tuple[dict[str, Any], BaseMessage, AnyMessage]] = {}
        for data, source in zip(out.messages, out.sources, strict=True):
            if source is None:
                made: AnyMessage = convert_to_messages([data])[0]  # type: ignore[assignment]
                reduced.append(made)
                continue
            original = messages[source]
            cached = self._back.get(id(data))
            if cached is not None and cached[0] is data and cached[1] is original:
                result = cached[2]
            elif data == dicts[source]:
                result = original
            else:
                result = _with_changes(original, data)
            back[id(data)] = (data, original, result)
            reduced.append(result)
        self._back = back
        return reduced, out


def reduce_messages(
    reducer: Reducer, messages: Sequence[AnyMessage], system: Any = None
) -> list[AnyMessage]:
    """Reduce LangChain messages with ``reducer``; unchanged messages are returned as given."""
    return LangChainSession(reducer).reduce(messages, system)[0]


def _with_changes(original: AnyMessage, data: dict[str, Any]) -> AnyMessage:
    """``original`` carrying the content (and call arguments) ctx rewrote in ``data``."""
    update: dict[str, Any] = {"content": data.get("content") or ""}
    if isinstance(original, AIMessage) and original.tool_calls:
        args = {
            call.get("id"): call.get("function", {}).get("arguments")
            for call in data.get("tool_calls") or []
        }
        calls = []
        for call in original.tool_calls:
            if call.get("id") not in args:
                continue  # a stage removed the call (and its result with it)
            text = args[call.get("id")]
            try:
                parsed = json.loads(text) if isinstance(text, str) else call["args"]
            except ValueError:
                parsed = {"ctx_note": text}
            calls.append({**call, "args": parsed if isinstance(parsed, dict) else call["args"]})
        update["tool_calls"] = calls
    changed: BaseMessage = original.model_copy(update=update)
    return changed  # type: ignore[return-value]


def _thread_id() -> str:
    """The LangGraph thread of the running graph ("" outside one or without a checkpointer)."""
    try:
        from langgraph.config import get_config

        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a runnable context
        return ""
    return str(configurable.get("thread_id") or "")
