"""OpenHands: evaluation ``output.jsonl`` files and their event lists.

``output.jsonl`` holds one instance per line: ``{instance_id, instruction, history:
[events], metrics, test_result, ...}``; every instance's ``history`` is reduced on its
own (:class:`OpenHandsOutput`). An event is an action ``{id, source, action, args,
message, tool_call_metadata?}`` or an observation ``{id, source, observation, content,
extras, cause, tool_call_metadata?}``. ctx reads (:class:`OpenHandsEvents`):

- a ``system`` action: the system prompt (``args.content``);
- a ``message`` action: a user or assistant message (``args.content``);
- an action with ``tool_call_metadata`` (``run``, ``read``, ``edit``, ``think``,
  ``finish``...): an assistant tool call named ``function_name``, with its
  ``args.thought`` as text;
- an observation with ``tool_call_metadata``: that call's result (``content``),
  including the tool-argument ``error`` observations whose ``cause`` is null;
- everything else (``recall`` and its observation, state changes): passed through.

Calls and results are linked by ``tool_call_metadata.tool_call_id``. The raw model
response each event repeats (``tool_call_metadata.model_response``) is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from ctxcli.core.model import Block, Kind, Message
from ctxcli.formats.collection import JsonlRows
from ctxcli.formats.format import Format
from ctxcli.formats.registry import register_format
from ctxcli.formats.slots import text_block

__all__ = ["OpenHandsEvents", "OpenHandsOutput"]


def _is_event(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("source"), str)
        and ("action" in item or "observation" in item)
    )


def _call_id(event: dict[str, Any]) -> str | None:
    meta = event.get("tool_call_metadata")
    if isinstance(meta, dict) and isinstance(meta.get("tool_call_id"), str):
        return str(meta["tool_call_id"])
    return None


def _function(event: dict[str, Any]) -> str | None:
    meta = event.get("tool_call_metadata")
    name = meta.get("function_name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else None


@register_format
class OpenHandsEvents(Format):
    """OpenHands events, one per line (an instance's ``history``)."""

    name = "openhands"
    description = "OpenHands events, one {source, action|observation, ...} per line"

    def sniff(self, records: Sequence[Any]) -> bool:
        """Claim a file whose first record is an OpenHands event."""
        return bool(records) and _is_event(records[0])

    def to_message(self, data: Any, key: int, line: int, path: str) -> Message | None:
        """Read an action or an observation as a message."""
        if not _is_event(data):
            return None
        args = data.get("args") if isinstance(data.get("args"), dict) else {}
        call_id = _call_id(data)
        if "observation" in data:
            if call_id is None:
                return None
            block = text_block(
                Kind.TOOL_RESULT,
                data.get("content"),
                ("content",),
                call_id=call_id,
                name=_function(data),
                is_error=data.get("observation") == "error",
            )
            return Message("tool", (block,), key)
        action = data.get("action")
        if call_id is not None:
            blocks: list[Block] = []
            if isinstance(args.get("thought"), str) and args["thought"]:
                blocks.append(text_block(Kind.TEXT, args["thought"], ("args", "thought")))
            shown = {k: v for k, v in args.items() if k != "thought"}
            blocks.append(
                Block(
                    Kind.TOOL_CALL,
                    orjson.dumps(shown).decode(),
                    call_id,
                    _function(data) or str(action),
                    slot=(("args",), "keep"),
                )
            )
            return Message("assistant", tuple(blocks), key)
        if action in ("system", "message") and isinstance(args.get("content"), str):
            role = {"system": "system", "agent": "assistant"}.get(
                "system" if action == "system" else data["source"], "user"
            )
            return Message(
                role, (text_block(Kind.TEXT, args["content"], ("args", "content")),), key
            )
        return None

    def apply(self, data: Any, old: Message, new: Message) -> Any:
        """Write ``new``'s changed texts into the event; arguments stay."""
        if old.tool_calls and not new.tool_calls:
            return _without_call(data, new)
        # Arguments are shown as JSON text and never written back.
        keep = [b for b in new.blocks if b.slot is None or b.slot[1] != "keep"]
        before = [b for b in old.blocks if b.slot is None or b.slot[1] != "keep"]
        return self.apply_block_texts(data, old.with_blocks(before), new.with_blocks(keep))

    def new_record(self, message: Message, neighbour: Any) -> Any:
        """Make a message event for a message a stage added."""
        source = "agent" if message.role == "assistant" else "user"
        return {"source": source, "action": "message", "args": {"content": message.text}}


def _without_call(data: dict[str, Any], new: Message) -> dict[str, Any]:
    """The event of a call a stage removed while keeping what the model said with it.

    An action *is* its call: left an action, it would still call the tool, and the
    observation the stage removed with the call would be missing (issue 41: the
    ``synaptic`` preset left 56 calls without results in a 3-instance output.jsonl). It
    becomes the agent ``message`` OpenHands writes for an answer without a call, holding
    the text; the original event is in the restore pack like any changed record.
    """
    text = "\n".join(b.text for b in new.blocks if b.kind is Kind.TEXT)
    args = {"content": text, "image_urls": None, "wait_for_response": False}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "tool_call_metadata":
            continue
        out[key] = {"action": "message", "message": text, "args": args}.get(key, value)
    return out


class OpenHandsOutput(JsonlRows):
    """An OpenHands evaluation ``output.jsonl``: one instance with its events per line."""

    name = "openhands_output"
    description = "OpenHands evaluation output.jsonl: one {instance_id, history: [events]} per line"
    columns = ("history",)

    def accept_item(self, item: dict[str, Any]) -> bool:
        """Accept a row item that is an OpenHands event."""
        return _is_event(item)
