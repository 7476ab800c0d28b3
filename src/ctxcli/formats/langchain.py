"""LangChain messages serialised one per line, in either of LangChain's two dump shapes.

- ``messages_to_dict``: ``{"type": "ai"|"human"|"tool"|"system"|..., "data": {...}}``
- ``dumpd``/``dumps``: ``{"lc": 1, "type": "constructor", "id": ["langchain", "schema",
  "messages", "AIMessage"|"HumanMessage"|"ToolMessage"|"SystemMessage"], "kwargs": {...}}``

Both carry the same fields (``data`` or ``kwargs``): ``content`` (a string or a list
of parts), and on AI messages ``tool_calls: [{name, args (object), id}]`` answered by
``ToolMessage``s with ``tool_call_id``.

The same calls are stored a second time: ``additional_kwargs.tool_calls`` (the raw
OpenAI shape, ``function.arguments`` as a JSON *string*) and, for Anthropic models,
``tool_use`` parts in ``content``. Stages see each call once (from ``tool_calls``,
or from ``additional_kwargs`` in old dumps that lack it); when a stage changes or
removes a call, its copies are changed or removed with it so the record never
contradicts itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxcli.core.errors import TranscriptError
from ctxcli.core.io import Input
from ctxcli.core.model import Block, Kind, Message
from ctxcli.formats.fixups import drop_emptied, require_recognised
from ctxcli.formats.format import Document, Format, OutRecord
from ctxcli.formats.jsontext import dumps_like
from ctxcli.formats.lines import Record
from ctxcli.formats.registry import register_format
from ctxcli.formats.slots import Path_, delete_many, encode_slot, get_in, json_text, set_in

__all__ = [
    "CLASS_ROLE",
    "LangChain",
    "ROLE_CLASS",
    "ROLE_TYPE",
    "TYPE_ROLE",
]

# messages_to_dict "type" and constructor class name -> role.
TYPE_ROLE = {
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "human": "user",
    "HumanMessageChunk": "user",
    "system": "system",
    "SystemMessageChunk": "system",
    "tool": "tool",
    "ToolMessageChunk": "tool",
    "function": "function",
    "FunctionMessageChunk": "function",
    "chat": "chat",
    "ChatMessageChunk": "chat",
}
CLASS_ROLE = {
    "AIMessage": "assistant",
    "AIMessageChunk": "assistant",
    "HumanMessage": "user",
    "HumanMessageChunk": "user",
    "SystemMessage": "system",
    "SystemMessageChunk": "system",
    "ToolMessage": "tool",
    "ToolMessageChunk": "tool",
    "FunctionMessage": "function",
    "FunctionMessageChunk": "function",
    "ChatMessage": "chat",
    "ChatMessageChunk": "chat",
}
ROLE_CLASS = {"assistant": "AIMessage", "user": "HumanMessage", "system": "SystemMessage"}
ROLE_TYPE = {"assistant": "ai", "user": "human", "system": "system"}


def _shape(data: Any) -> tuple[str | None, Path_]:
    """The role and the path of the message fields, or (None, ()) for another record."""
    if not isinstance(data, dict):
        return None, ()
    if data.get("lc") == 1 and data.get("type") == "constructor":
        ident = data.get("id")
        kwargs = data.get("kwargs")
        if isinstance(ident, list) and ident and isinstance(kwargs, dict):
            role = CLASS_ROLE.get(str(ident[-1]))
            if role is not None:
                return role, ("kwargs",)
        return None, ()
    if isinstance(data.get("data"), dict) and data.get("type") in TYPE_ROLE:
        return TYPE_ROLE[data["type"]], ("data",)
    return None, ()


def _text_parts(parts: list[Any]) -> str:
    return "\n".join(
        p if isinstance(p, str) else p["text"]
        for p in parts
        if isinstance(p, str)
        or (isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
    )


@register_format
class LangChain(Format):
    """LangChain serialised messages (``messages_to_dict`` or ``dumpd``) JSONL."""

    name = "langchain"
    description = "LangChain messages, {type, data} or {lc, type: constructor, kwargs} per line"

    def sniff(self, records: Sequence[Any]) -> bool:
        """Claim records shaped as LangChain dumps."""
        if not records or not all(isinstance(r, dict) for r in records):
            return False
        return any(_shape(r)[0] is not None for r in records)

    def build(
        self, raw: Input, path: str, records: list[Record], *, whole_texts: bool = False
    ) -> Document:
        """Refuse a record that is not a LangChain message, then build the document."""
        require_recognised(
            records,
            path,
            lambda d: _shape(d)[0] is not None,
            'a LangChain message ({"type", "data"} or {"lc": 1, "type": "constructor"})',
        )
        return super().build(raw, path, records, whole_texts=whole_texts)

    def to_message(self, data: Any, key: int, line: int, path: str) -> Message | None:
        """Read a LangChain message (either dump) as a message."""
        if not isinstance(data, dict):
            raise TranscriptError(path, line, "not a LangChain message (expected a JSON object)")
        role, p = _shape(data)
        if role is None:
            return None
        fields = get_in(data, p)
        if role == "chat":
            role = fields.get("role") if isinstance(fields.get("role"), str) else "user"
        content = fields.get("content")
        if role == "tool":
            call_id = fields.get("tool_call_id")
            name = fields.get("name")
            if isinstance(content, list):
                text, slot = _text_parts(content), ((*p, "content"), "parts")
            else:
                text = content if isinstance(content, str) else ""
                slot = ((*p, "content"), "str")
            block = Block(
                Kind.TOOL_RESULT,
                text,
                None if call_id is None else str(call_id),
                name if isinstance(name, str) else None,
                is_error=fields.get("status") == "error",
                slot=slot,
            )
            return Message("tool", (block,), key)
        blocks = self._content_blocks(content, (*p, "content"))
        if role == "assistant":
            blocks.extend(self._call_blocks(fields, p))
        return Message(role, tuple(blocks), key)

    @staticmethod
    def _content_blocks(content: Any, path: Path_) -> list[Block]:
        if isinstance(content, str):
            return [Block(Kind.TEXT, content, slot=(path, "str"))] if content else []
        if not isinstance(content, list):
            return []
        blocks = []
        for i, part in enumerate(content):
            ppath = (*path, i)
            if isinstance(part, str):
                blocks.append(Block(Kind.TEXT, part, slot=(ppath, "str")))
                continue
            ptype = part.get("type") if isinstance(part, dict) else None
            if ptype == "text" and isinstance(part.get("text"), str):
                blocks.append(Block(Kind.TEXT, part["text"], slot=((*ppath, "text"), "str")))
            elif ptype in ("thinking", "reasoning"):
                text = part.get("thinking", part.get("reasoning"))
                blocks.append(
                    Block(
                        Kind.THINKING, text if isinstance(text, str) else "", slot=(ppath, "keep")
                    )
                )
            elif ptype in ("image_url", "image"):
                blocks.append(Block(Kind.IMAGE, slot=(ppath, "keep")))
            # tool_use parts duplicate tool_calls: shown once, through tool_calls.
            elif ptype != "tool_use":
                blocks.append(Block(Kind.OTHER, slot=(ppath, "keep")))
        return blocks

    @staticmethod
    def _call_blocks(fields: dict[str, Any], p: Path_) -> list[Block]:
        calls = fields.get("tool_calls")
        blocks = []
        if isinstance(calls, list) and calls:
            for i, call in enumerate(calls):
                if not isinstance(call, dict):
                    continue
                cid, name = call.get("id"), call.get("name")
                blocks.append(
                    Block(
                        Kind.TOOL_CALL,
                        json_text(call.get("args", {})),
                        None if cid is None else str(cid),
                        name if isinstance(name, str) else None,
                        slot=((*p, "tool_calls", i, "args"), "json"),
                    )
                )
            return blocks
        extra = fields.get("additional_kwargs")
        raw_calls = extra.get("tool_calls") if isinstance(extra, dict) else None
        if isinstance(raw_calls, list):  # old dumps: the OpenAI shape only
            for i, call in enumerate(raw_calls):
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict):
                    continue
                cid, name, args = call.get("id"), fn.get("name"), fn.get("arguments")
                blocks.append(
                    Block(
                        Kind.TOOL_CALL,
                        args if isinstance(args, str) else "",
                        None if cid is None else str(cid),
                        name if isinstance(name, str) else None,
                        slot=(
                            (*p, "additional_kwargs", "tool_calls", i, "function", "arguments"),
                            "str",
                        ),
                    )
                )
        return blocks

    # -- writing back -------------------------------------------------------------------

    def apply(self, data: Any, old: Message, new: Message) -> Any:
        """Write ``new``'s changed blocks into the message's slots."""
        _, p = _shape(data)
        old_by_slot = {b.slot: b for b in old.blocks if b.slot is not None}
        new_slots = {b.slot for b in new.blocks if b.slot is not None}
        for block in new.blocks:
            before = old_by_slot.get(block.slot) if block.slot is not None else None
            if before is None or before.text == block.text:
                continue
            path, codec = block.slot
            if codec == "keep":
                continue
            if codec == "parts":
                data = set_in(data, path, self._parts_with_text(get_in(data, path), block.text))
                continue
            data = set_in(data, path, encode_slot(codec, get_in(data, path), block.text))
            if block.kind is Kind.TOOL_CALL and block.call_id is not None:
                data = self._sync_call(data, p, block.call_id, path)
        gone = [b for b in old.blocks if b.slot not in new_slots]
        data = self._remove(data, p, gone)
        added = [b for b in new.blocks if b.slot is None or b.slot not in old_by_slot]
        if added:
            data = self._add_texts(data, p, [b.text for b in added if b.kind is Kind.TEXT])
        return data

    @staticmethod
    def _parts_with_text(parts: Any, text: str) -> Any:
        others = [
            x
            for x in parts
            if not (isinstance(x, str) or (isinstance(x, dict) and x.get("type") == "text"))
        ]
        return [{"type": "text", "text": text}, *others] if others else text

    @staticmethod
    def _sync_call(data: Any, p: Path_, call_id: str, changed: Path_) -> Any:
        """Copy a changed call's arguments into its duplicates (same id)."""
        fields = get_in(data, p)
        value = get_in(data, changed)
        if changed[len(p)] == "tool_calls":
            extra = fields.get("additional_kwargs")
            raw_calls = extra.get("tool_calls") if isinstance(extra, dict) else None
            for i, call in enumerate(raw_calls if isinstance(raw_calls, list) else []):
                fn = call.get("function") if isinstance(call, dict) else None
                if call.get("id") != call_id or not isinstance(fn, dict):
                    continue
                old_args = fn.get("arguments")
                sample = (
                    old_args.encode("utf-8", "surrogatepass") if isinstance(old_args, str) else b""
                )
                text = dumps_like(value, sample).decode("utf-8", "surrogatepass")
                data = set_in(
                    data, (*p, "additional_kwargs", "tool_calls", i, "function", "arguments"), text
                )
        content = fields.get("content")
        for i, part in enumerate(content if isinstance(content, list) else []):
            if (
                isinstance(part, dict)
                and part.get("type") == "tool_use"
                and part.get("id") == call_id
            ):
                new_input = (
                    value if isinstance(value, dict) else encode_slot("json", None, str(value))
                )
                data = set_in(data, (*p, "content", i, "input"), new_input)
        return data

    @staticmethod
    def _remove(data: Any, p: Path_, gone: list[Block]) -> Any:
        """Remove the content parts and calls of ``gone`` blocks, with their duplicates."""
        if not gone:
            return data
        fields = get_in(data, p)
        part_idx = [
            b.slot[0][len(p) + 1]
            for b in gone
            if b.kind is not Kind.TOOL_CALL
            and b.slot[0][len(p)] == "content"
            and len(b.slot[0]) > len(p) + 1
        ]
        if any(b.slot == ((*p, "content"), "str") for b in gone if b.kind is not Kind.TOOL_RESULT):
            data = set_in(data, (*p, "content"), "")
        call_ids = {b.call_id for b in gone if b.kind is Kind.TOOL_CALL}
        content = fields.get("content")
        if call_ids and isinstance(content, list):
            part_idx += [
                i
                for i, x in enumerate(content)
                if isinstance(x, dict) and x.get("type") == "tool_use" and x.get("id") in call_ids
            ]
        if part_idx:
            data = delete_many(data, (*p, "content"), sorted(set(part_idx)))
        if not call_ids:
            return data
        calls = fields.get("tool_calls")
        if isinstance(calls, list):
            idx = [
                i for i, c in enumerate(calls) if isinstance(c, dict) and c.get("id") in call_ids
            ]
            data = delete_many(data, (*p, "tool_calls"), idx)
        extra = fields.get("additional_kwargs")
        raw_calls = extra.get("tool_calls") if isinstance(extra, dict) else None
        if isinstance(raw_calls, list):
            left = [c for c in raw_calls if not (isinstance(c, dict) and c.get("id") in call_ids)]
            # LangChain omits the key when a message makes no call.
            new_extra = {k: v for k, v in extra.items() if k != "tool_calls"}
            if left:
                new_extra["tool_calls"] = left
            data = set_in(data, (*p, "additional_kwargs"), new_extra)
        return data

    @staticmethod
    def _add_texts(data: Any, p: Path_, texts: list[str]) -> Any:
        if not texts:
            return data
        content = get_in(data, p).get("content")
        if isinstance(content, list):
            return set_in(
                data, (*p, "content"), [*content, *({"type": "text", "text": t} for t in texts)]
            )
        joined = "\n".join([content, *texts] if isinstance(content, str) and content else texts)
        return set_in(data, (*p, "content"), joined)

    def new_record(self, message: Message, neighbour: Any) -> Any:
        """Make a message in its neighbour's dump shape for a message a stage added."""
        role = message.role if message.role in ROLE_CLASS else "user"
        text = "\n".join(b.text for b in message.blocks if b.kind is Kind.TEXT)
        if isinstance(neighbour, dict) and _shape(neighbour)[1] == ("data",):
            return {
                "type": ROLE_TYPE[role],
                "data": {
                    "content": text,
                    "additional_kwargs": {},
                    "response_metadata": {},
                    "type": ROLE_TYPE[role],
                    "name": None,
                    "id": None,
                },
            }
        return {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "schema", "messages", ROLE_CLASS[role]],
            "kwargs": {"content": text, "type": ROLE_TYPE[role]},
        }

    def fixup(self, plan: list[OutRecord]) -> None:
        """Drop the messages a stage emptied."""
        drop_emptied(plan)
