"""OpenAI Responses API input items, as a program holds them (the Agents SDK's input list).

The items are those of a Codex rollout without its envelope (see :mod:`.codex`):
``message`` (and the short ``{"role", "content"}`` form without ``type``),
``function_call`` / ``function_call_output``, ``custom_tool_call(_output)``,
``local_shell_call`` and ``reasoning`` (never rewritten). Any other item (a hosted
tool call, an ``item_reference``) is passed through as it is. The format is not
registered for files: it reads dicts handed in by :class:`ctxcli.agent.reducer.Reducer`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ctxcli.core.io import Input
from ctxcli.formats.codex import Codex
from ctxcli.formats.format import Document
from ctxcli.formats.lines import Record

__all__ = ["OpenAIResponses"]


class OpenAIResponses(Codex):
    """OpenAI Responses API input items (``list[TResponseInputItem]``)."""

    name = "openai_responses"
    client = ""  # the Agents SDK's model input: no client resumes from such a file
    description = "OpenAI Responses API input items (the Agents SDK's model input)"

    def to_message(self, data: Any, key: int, line: int, path: str) -> Any:
        """Read a Responses input item (a bare message too) as a message."""
        if isinstance(data, dict) and "type" not in data and isinstance(data.get("role"), str):
            # EasyInputMessage: a message without "type"; its slots are the same paths.
            data = {**data, "type": "message"}
        return super().to_message(data, key, line, path)

    def assemble(
        self, raw: Input, path: str, records: list[Record], warnings: list[str] | None = None
    ) -> Document:
        """Group each model response's consecutive assistant items, then assemble."""
        # Consecutive assistant items (reasoning, text, parallel calls) are one model
        # response and share a group, as in a Codex rollout.
        group: str | None = None
        for rec in records:
            msg = rec.message
            if msg is None:
                continue
            if msg.role != "assistant":
                group = None
                continue
            if group is None:
                group = f"response@{rec.line}"
            if msg.group != group:
                rec.message = replace(msg, group=group)
        return super().assemble(raw, path, records, warnings)
