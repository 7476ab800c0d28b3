"""OpenAI Agents SDK: ctx's chain as the run's ``call_model_input_filter``.

``pip install 'ctx-lossless[agents]'``, then::

    from agents import Agent, RunConfig, Runner
    from ctxcli.agent.openai_agents import CtxInputFilter

    ctx = CtxInputFilter(preset="eino")
    agent = Agent(name="coder", tools=[*my_tools, ctx.read_tool])
    result = await Runner.run(agent, task, run_config=RunConfig(call_model_input_filter=ctx))

Before every model call the SDK hands the filter the input items (OpenAI Responses
items) and the instructions; the filter returns the reduced items. Decisions are kept
per conversation, so an item reduced once is sent as the same bytes on every later
call; the ``ctx_read`` tool reads what was offloaded back.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

from agents import FunctionTool, function_tool
from agents.run_config import CallModelData, ModelInputData

from ctxcli.agent.reducer import Reducer, ReducerResult
from ctxcli.core.errors import CtxError
from ctxcli.pipeline.config import Config
from ctxcli.pipeline.live_loop import record_digest

__all__ = ["CtxInputFilter"]

READ_TOOL = "ctx_read"


class CtxInputFilter:
    """A ``call_model_input_filter`` that runs a ctx chain on the model input.

    Args:
        config: the chain and settings (default: ctx's default chain, or ``preset``).
        preset: a shipped chain such as ``"eino"``.
        offload_dir: where removed texts go (a directory or an fsspec URL).
        tokenizer: overrides the config's token counter.
        max_conversations: decisions are kept for this many conversations (told apart
            by their first item; the least recently used are forgotten, then recomputed).
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
        first = Reducer(
            config,
            preset=preset,
            offload_dir=offload_dir,
            tokenizer=tokenizer,
            api="openai_responses",
            read_tool=READ_TOOL,
        )
        self.config = first.config
        self.offload = first.offload
        self.max_conversations = max(1, max_conversations)
        self._spare: Reducer | None = first
        self._lock = threading.Lock()
        self._reducers: OrderedDict[bytes, Reducer] = OrderedDict()
        self.results: list[ReducerResult] = []
        """What each model call's reduction did, oldest first (the last 100)."""
        self.read_tool: FunctionTool = _read_tool(self)

    @property
    def offload_dir(self) -> str:
        """The absolute path or URL that hints cite and ``ctx_read`` reads from."""
        return self.offload.root

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """Reduce the input of one model call."""
        items = list(data.model_data.input)
        if not items:
            return data.model_data
        instructions = data.model_data.instructions
        # One reduction at a time: a reducer's memory is not thread-safe.
        with self._lock:
            reducer = self._reducer(record_digest(b"agents", [instructions, items[0]]))
            out = reducer.reduce(items, system=instructions)
            self.results.append(out)
            del self.results[:-100]
        return ModelInputData(input=out.messages, instructions=instructions)  # type: ignore[arg-type]

    def _reducer(self, key: bytes) -> Reducer:
        reducer = self._reducers.get(key)
        if reducer is None:
            reducer, self._spare = self._spare, None
            if reducer is None:
                reducer = Reducer(
                    self.config, offload_dir=self.offload.root, api="openai_responses"
                )
            self._reducers[key] = reducer
            while len(self._reducers) > self.max_conversations:
                self._reducers.popitem(last=False)
        self._reducers.move_to_end(key)
        return reducer


def _read_tool(owner: CtxInputFilter) -> FunctionTool:
    offload = owner.offload

    @function_tool(name_override=READ_TOOL)
    def ctx_read(path: str, offset: int = 0, limit: int = 200) -> str:
        """Read a file that ctx saved when it shortened the conversation.

        Args:
            path: the path named in a "[ctx: ...]" note.
            offset: the first line to read (0-based).
            limit: how many lines to read.
        """
        try:
            return offload.read_window(path, offset, limit)
        except CtxError as exc:
            return f"error: {exc}"

    return ctx_read
