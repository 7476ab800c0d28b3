"""OpenAI chat-completions messages, one JSON object per line.

``{"role": "system"|"developer"|"user"|"assistant"|"tool", "content": str | [parts] | null}``;
assistant messages may carry ``tool_calls[].{id, function.{name, arguments}}``, answered
by ``role: "tool"`` messages with ``tool_call_id``. Unknown fields are kept as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxcli.core.errors import TranscriptError
from ctxcli.core.model import Block, Kind, Message
from ctxcli.formats.format import Format
from ctxcli.formats.registry import register_format
from ctxcli.formats.slots import delete_many, set_in, text_block

__all__ = ["OpenAIChat", "ROLES"]

ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


@register_format
class OpenAIChat(Format):
    """OpenAI chat-completions JSONL (tau-bench and most chat logs)."""

    name = "openai_chat"
    description = "OpenAI chat messages, one {role, content, tool_calls} per line"
    incremental = True

    def sniff(self, records: Sequence[Any]) -> bool:
        """Claim a file whose first record is a chat message."""
        # The first record decides; a later record of another shape is then an error
        # that names its line instead of an "unrecognised format" for the whole file.
        first = records[0] if records else None
        return isinstance(first, dict) and first.get("role") in ROLES and "type" not in first

    lazy_texts = True

    def to_message(self, data: Any, key: int, line: int, path: str) -> Message | None:
        """Read a chat message, its tool calls and content parts."""
        if not isinstance(data, dict) or not isinstance(data.get("role"), str):
            raise TranscriptError(
                path, line, 'not an OpenAI chat message (expected an object with a "role")'
            )
        role = data["role"]
        if role == "developer":
            role = "system"
        if role == "tool":
            return Message("tool", (_result_block(data),), key)
        blocks = _content_blocks(data.get("content"))
        calls = data.get("tool_calls")
        if isinstance(calls, list):
            blocks += _call_blocks(calls)
        return Message(role, tuple(blocks), key)

    def apply(self, data: Any, old: Message, new: Message) -> Any:
        """Write ``new``'s changed texts into the message's content and calls."""
        for block in new.blocks:
            if block.slot is not None and block.slot[1] == "parts":
                before = next(b for b in old.blocks if b.slot == block.slot)
                if before.text != block.text:
                    data = set_in(data, ("content",), block.text)
        data = self.apply_block_texts(
            data,
            old.with_blocks([b for b in old.blocks if b.slot is None or b.slot[1] != "parts"]),
            new.with_blocks([b for b in new.blocks if b.slot is None or b.slot[1] != "parts"]),
        )
        kept = {b.slot for b in new.blocks}
        gone_calls = [
            b.slot[0][1] for b in old.blocks if b.kind is Kind.TOOL_CALL and b.slot not in kept
        ]
        if gone_calls:
            data = delete_many(data, ("tool_calls",), gone_calls)
            if not data["tool_calls"]:
                data = {k: v for k, v in data.items() if k != "tool_calls"}
        gone_parts = [
            b.slot[0][1]
            for b in old.blocks
            if b.kind is not Kind.TOOL_CALL and b.slot not in kept and len(b.slot[0]) >= 2
        ]
        if gone_parts:
            data = delete_many(data, ("content",), gone_parts)
        elif any(b.slot == (("content",), "str") for b in old.blocks) and not any(
            b.slot == (("content",), "str") for b in new.blocks
        ):
            data = set_in(data, ("content",), None)
        return data

    def new_record(self, message: Message, neighbour: Any) -> Any:
        """Make a chat message for a message a stage added."""
        return {"role": message.role, "content": message.text}


def _result_block(data: dict[str, Any]) -> Block:
    """The one block of a ``tool`` message: its result."""
    content = data.get("content")
    call_id = data.get("tool_call_id")
    name = data.get("name") if isinstance(data.get("name"), str) else None
    if isinstance(content, list):
        # A list of parts is one result; writing it back makes it a string.
        text = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        return Block(Kind.TOOL_RESULT, text, str(call_id), name, slot=(("content",), "parts"))
    return text_block(
        Kind.TOOL_RESULT,
        content,
        ("content",),
        call_id=None if call_id is None else str(call_id),
        name=name,
    )


def _content_blocks(content: Any) -> list[Block]:
    """The blocks of a ``content`` string or list of parts."""
    if isinstance(content, str):
        return [text_block(Kind.TEXT, content, ("content",))]
    blocks: list[Block] = []
    if isinstance(content, list):
        for i, part in enumerate(content):
            ptype = part.get("type") if isinstance(part, dict) else None
            if ptype in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
                blocks.append(text_block(Kind.TEXT, part["text"], ("content", i, "text")))
            elif ptype in ("image_url", "input_image", "image"):
                blocks.append(Block(Kind.IMAGE, slot=(("content", i), "keep")))
            else:
                blocks.append(Block(Kind.OTHER, slot=(("content", i), "keep")))
    return blocks


def _call_blocks(calls: list[Any]) -> list[Block]:
    """A block per ``tool_calls`` entry: its arguments, as the string they are."""
    blocks: list[Block] = []
    for i, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        fn: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
        args = fn.get("arguments")
        blocks.append(
            Block(
                Kind.TOOL_CALL,
                args if isinstance(args, str) else "",
                None if call.get("id") is None else str(call.get("id")),
                fn.get("name") if isinstance(fn.get("name"), str) else None,
                slot=(("tool_calls", i, "function", "arguments"), "str"),
            )
        )
    return blocks
