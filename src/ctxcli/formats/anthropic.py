"""Anthropic Messages API conversations, one ``{"role", "content"}`` per line.

``content`` is a string or a list of content blocks:

- ``text`` -> TEXT;
- ``tool_use{id, name, input}`` -> TOOL_CALL whose text is ``input`` as JSON (written
  back as an object, codec ``"json"``);
- ``tool_result{tool_use_id, content, is_error}`` -> one TOOL_RESULT; ``content`` is a
  string or a list of blocks (its text blocks are joined; a changed text is written
  back as a string, or as one text block ahead of any image blocks);
- ``thinking`` / ``redacted_thinking`` -> THINKING, never modified (the signature
  covers the text);
- ``image`` / ``document`` -> IMAGE, ``search_result`` and server-tool blocks -> OTHER:
  kept verbatim.

A user turn answering parallel calls holds several ``tool_result`` blocks, one block
each. The block helpers here are shared with :mod:`.claude_code`, which stores the
same block schema in ``message.content``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxcli.core.errors import TranscriptError
from ctxcli.core.model import Block, Kind, LazyText, Message
from ctxcli.formats.fixups import drop_emptied
from ctxcli.formats.format import Format, OutRecord
from ctxcli.formats.registry import register_format
from ctxcli.formats.slots import Path_, encode_slot, get_in, json_text, set_in

__all__ = [
    "ANTHROPIC_ONLY",
    "Anthropic",
    "CallInput",
    "KEEP",
    "ROLES",
    "STR",
    "TEXT",
    "TOOL_RESULT",
    "TOOL_USE",
    "blocks_from_content",
    "call_input",
    "content_from_blocks",
    "has_anthropic_blocks",
    "item_from_block",
    "result_text",
    "text_path",
    "write_content",
]

ROLES = {"user", "assistant"}

# Block types only the Anthropic schema has; a file using any of them is Anthropic
# rather than OpenAI chat (both share {"type": "text", "text"} parts).
ANTHROPIC_ONLY = {
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "document",
    "server_tool_use",
    "web_search_tool_result",
    "search_result",
}

# Slot tags: how a block sits in its content item.
STR = "str"  # the whole ``content`` is one string
TEXT = "text"
TOOL_USE = "tool_use"
TOOL_RESULT = "tool_result"
KEEP = "keep"  # never written (thinking, images, unknown blocks)


def result_text(content: Any) -> str:
    """The text of a ``tool_result`` content: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    return ""


def blocks_from_content(content: Any, prefix: Path_) -> list[Block]:
    """The blocks of an Anthropic ``content`` value found at ``prefix`` in its record."""
    if isinstance(content, str):
        return [Block(Kind.TEXT, content, slot=(prefix, STR))]
    if not isinstance(content, list):
        return []
    blocks: list[Block] = []
    for i, item in enumerate(content):
        path = (*prefix, i)
        btype = item.get("type") if isinstance(item, dict) else None
        if btype == "text" and isinstance(item.get("text"), str):
            blocks.append(Block(Kind.TEXT, item["text"], slot=(path, TEXT)))
        elif btype == "tool_use" or btype == "server_tool_use":
            call_id = item.get("id")
            name = item.get("name")
            blocks.append(
                Block(
                    Kind.TOOL_CALL,
                    json_text(item.get("input", {})),
                    None if call_id is None else str(call_id),
                    name if isinstance(name, str) else None,
                    # Server tools run on Anthropic's side: shown, never rewritten.
                    slot=(path, TOOL_USE if btype == "tool_use" else KEEP),
                )
            )
        elif btype == "tool_result":
            call_id = item.get("tool_use_id")
            blocks.append(
                Block(
                    Kind.TOOL_RESULT,
                    result_text(item.get("content")),
                    None if call_id is None else str(call_id),
                    is_error=item.get("is_error") is True,
                    slot=(path, TOOL_RESULT),
                )
            )
        elif btype == "thinking":
            text = item.get("thinking")
            blocks.append(
                Block(Kind.THINKING, text if isinstance(text, str) else "", slot=(path, KEEP))
            )
        elif btype == "redacted_thinking":
            blocks.append(Block(Kind.THINKING, "", slot=(path, KEEP)))
        elif btype in ("image", "document"):
            blocks.append(Block(Kind.IMAGE, slot=(path, KEEP)))
        else:
            blocks.append(Block(Kind.OTHER, slot=(path, KEEP)))
    return blocks


def text_path(block: Block) -> Path_ | None:
    """Where ``block``'s text sits in its record as a string of its own, if it does.

    A text item's ``text``; a tool_result's ``content`` when that is a string (the
    caller checks: a list of parts is joined into the text); a string content.
    """
    if block.slot is None:
        return None
    path, tag = block.slot
    if tag == STR:
        return tuple(path)
    if tag == TEXT:
        return (*path, "text")
    if tag == TOOL_RESULT:
        return (*path, "content")
    return None


class CallInput(LazyText):
    """A tool_use block's text (its ``input`` as JSON) made again from the item when read.

    The item is part of a loaded record, which nothing edits in place.
    """

    __slots__ = ("item", "chars")

    def __init__(self, item: dict[str, Any], chars: int) -> None:
        self.item, self.chars = item, chars

    def text(self) -> str:
        """Return the call's input as the JSON text the model wrote."""
        return json_text(self.item.get("input", {}))


def call_input(block: Block, data: Any) -> CallInput | None:
    """The :class:`CallInput` of a tool_use block of record ``data``, else None."""
    if block.slot is None or block.slot[1] != TOOL_USE:
        return None
    item = get_in(data, block.slot[0])
    return CallInput(item, len(block.text)) if isinstance(item, dict) else None


def _with_result_text(item: dict[str, Any], text: str) -> dict[str, Any]:
    content = item.get("content")
    if isinstance(content, list):
        others = [p for p in content if not (isinstance(p, dict) and p.get("type") == "text")]
        if others:
            # Images and other non-text parts stay, after the (new) text.
            return {**item, "content": [{"type": "text", "text": text}, *others]}
    return {**item, "content": text}


def _updated_item(item: Any, tag: str, text: str) -> Any:
    if tag == TEXT:
        return {**item, "text": text}
    if tag == TOOL_USE:
        return {**item, "input": encode_slot("json", item.get("input"), text)}
    if tag == TOOL_RESULT:
        return _with_result_text(item, text)
    return item  # KEEP: thinking (signed), images, unknown blocks are never rewritten


def item_from_block(block: Block) -> dict[str, Any] | None:
    """A new content item for a block a stage created (None if it cannot be made)."""
    if block.kind is Kind.TEXT:
        return {"type": "text", "text": block.text}
    if block.kind is Kind.TOOL_CALL:
        return {
            "type": "tool_use",
            "id": block.call_id,
            "name": block.name,
            "input": encode_slot("json", None, block.text),
        }
    if block.kind is Kind.TOOL_RESULT:
        item: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": block.call_id,
            "content": block.text,
        }
        if block.is_error:
            item["is_error"] = True
        return item
    return None


def content_from_blocks(blocks: Sequence[Block]) -> str | list[dict[str, Any]]:
    """Content for a new record: a plain string for a text-only message, else blocks."""
    if all(b.kind is Kind.TEXT for b in blocks):
        return "\n".join(b.text for b in blocks)
    return [item for b in blocks if (item := item_from_block(b)) is not None]


def write_content(data: Any, prefix: Path_, old: Message, new: Message) -> Any:
    """A copy of ``data`` whose content at ``prefix`` holds ``new``'s blocks.

    Blocks keep their original item (only a changed text is written into it); blocks
    a stage removed disappear; blocks a stage added (no slot) become new items.
    """
    content = get_in(data, prefix)
    old_by_slot = {b.slot: b for b in old.blocks if b.slot is not None}
    items: list[Any] = []
    string: str | None = None
    for block in new.blocks:
        before = old_by_slot.get(block.slot) if block.slot is not None else None
        if before is None:
            # A block a stage created (or one carried over from another record).
            made = item_from_block(block)
            if made is not None:
                items.append(made)
            continue
        path, tag = block.slot
        if tag == STR:
            string = block.text
            items.append(None)  # placeholder for the string content
            continue
        item = content[path[-1]]
        if before.text != block.text:
            item = _updated_item(item, tag, block.text)
        items.append(item)
    if string is not None and items == [None]:
        new_content: Any = string
    elif string is not None:
        new_content = [{"type": "text", "text": string} if x is None else x for x in items]
    else:
        new_content = items
    if isinstance(content, list) and len(new_content) == len(content):
        if all(a is b for a, b in zip(new_content, content, strict=True)):
            return data
    if new_content == content and type(new_content) is type(content):
        return data
    return set_in(data, prefix, new_content)


def has_anthropic_blocks(content: Any) -> bool:
    """True if ``content`` holds a block type only the Anthropic schema has."""
    if not isinstance(content, list):
        return False
    for item in content:
        if not isinstance(item, dict):
            continue
        btype = item.get("type")
        if btype in ANTHROPIC_ONLY or (btype == "image" and isinstance(item.get("source"), dict)):
            return True
    return False


@register_format
class Anthropic(Format):
    """Anthropic Messages API ``MessageParam`` JSONL."""

    name = "anthropic"
    description = "Anthropic Messages, one {role, content: str | [blocks]} per line"
    incremental = True

    def sniff(self, records: Sequence[Any]) -> bool:
        """Claim a file whose blocks only the Messages API has (tool_use, thinking, images)."""
        # Plain-text-only files read the same as OpenAI chat and may stay there; a
        # tool_use/tool_result/thinking/image-source block makes the file Anthropic.
        if not records:
            return False
        for r in records:
            # API responses carry "type": "message"; any other "type" is another format.
            if not isinstance(r, dict) or r.get("role") not in ROLES:
                return False
            if r.get("type", "message") != "message":
                return False
            if "tool_calls" in r or "tool_call_id" in r:
                return False
            if not isinstance(r.get("content"), str | list):
                return False
        return any(has_anthropic_blocks(r.get("content")) for r in records)

    def to_message(self, data: Any, key: int, line: int, path: str) -> Message | None:
        """Read one Messages API turn as a message."""
        if not isinstance(data, dict) or not isinstance(data.get("role"), str):
            raise TranscriptError(
                path, line, 'not an Anthropic message (expected an object with a "role")'
            )
        blocks = blocks_from_content(data.get("content"), ("content",))
        return Message(data["role"], tuple(blocks), key)

    def apply(self, data: Any, old: Message, new: Message) -> Any:
        """Write ``new``'s changed blocks into the turn's content."""
        return write_content(data, ("content",), old, new)

    def fixup(self, plan: list[OutRecord]) -> None:
        """Drop the turns a stage emptied."""
        drop_emptied(plan)

    def new_record(self, message: Message, neighbour: Any) -> Any:
        """Make a user or assistant turn for a message a stage added."""
        # The Messages API knows only user and assistant turns.
        role = "assistant" if message.role == "assistant" else "user"
        return {"role": role, "content": content_from_blocks(message.blocks)}
