"""OpenAI Codex CLI rollouts (``~/.codex/sessions/**/rollout-*.jsonl``).

Every line is ``{"timestamp", "type", "payload"}``. Only ``response_item`` payloads
are what the model is sent (they are OpenAI Responses API items):

- ``message``: ``role`` user/assistant/developer (developer -> system), ``content`` a
  list of ``input_text``/``output_text`` parts (TEXT) and ``input_image`` (IMAGE);
- ``function_call``: TOOL_CALL, ``arguments`` is already JSON *text*;
  ``custom_tool_call`` (apply_patch): TOOL_CALL whose text is the raw ``input``;
  ``local_shell_call``: TOOL_CALL showing its ``action`` object as JSON;
- ``function_call_output`` / ``custom_tool_call_output``: TOOL_RESULT by ``call_id``.
  An ``output`` may itself be a JSON-encoded string ``{"output": "...", "metadata":
  {...}}``: the inner text is what stages see, and a changed text is written back
  into that object and re-encoded the way it was (codec ``"json_output"``);
- ``reasoning``: THINKING from its ``summary`` (and ``content``) texts; never
  rewritten, and ``encrypted_content`` is opaque.

``session_meta``, ``turn_context``, ``event_msg`` (token counts and the user/agent
message *duplicates* the UI shows), ``compacted`` and ``ghost_snapshot`` items pass
through; they are not messages, so nothing is counted twice. ``session_meta`` is
always kept: Codex cannot resume a rollout without it.

Older rollouts (before the ``payload`` envelope) wrote the items themselves, one per
line, after a ``{"id", "timestamp", "instructions"}`` header; they load the same way.
Codex keeps no message ids: consecutive assistant-side items (reasoning, text, calls)
between two non-assistant messages are one response and share a :attr:`Message.group`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ctxcli.core.errors import TranscriptError
from ctxcli.core.io import Input
from ctxcli.core.model import Block, Kind, Message
from ctxcli.formats.fixups import drop_emptied, require_recognised
from ctxcli.formats.format import Document, Format, OutRecord
from ctxcli.formats.jsontext import dumps_like, loads_record
from ctxcli.formats.lines import Record
from ctxcli.formats.registry import register_format
from ctxcli.formats.slots import Path_, delete_many, encode_slot, get_in, json_text, set_in

__all__ = [
    "CALLS",
    "Codex",
    "ENVELOPE_TYPES",
    "ITEM_TYPES",
    "OUTPUTS",
    "ROLE",
    "TEXT_PARTS",
]

ENVELOPE_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
ITEM_TYPES = {
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
}
CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
OUTPUTS = {"function_call_output", "custom_tool_call_output"}
ROLE = {"developer": "system"}
TEXT_PARTS = {"input_text", "output_text", "text", "summary_text", "reasoning_text"}


def _item(data: Any) -> tuple[dict[str, Any] | None, Path_]:
    """The Responses item a record holds, and its path inside the record."""
    if not isinstance(data, dict):
        return None, ()
    payload = data.get("payload")
    if data.get("type") == "response_item" and isinstance(payload, dict):
        return payload, ("payload",)
    if "payload" not in data and data.get("type") in ITEM_TYPES:
        return data, ()  # legacy rollout: the item is the line
    return None, ()


def _is_codex(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    if data.get("type") in ENVELOPE_TYPES and "payload" in data:
        return True
    return _item(data)[0] is not None or (
        "id" in data and "timestamp" in data and "type" not in data
    )


def _inner_output(text: str) -> str | None:
    """The ``output`` of a JSON-encoded ``{"output", "metadata"}`` string, else None."""
    if not text.startswith("{") or '"output"' not in text:
        return None
    try:
        value = loads_record(text.encode("utf-8", "surrogatepass"))
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("output"), str):
        if set(value) <= {"output", "metadata"}:
            return str(value["output"])
    return None


def _text_of_parts(parts: list[Any]) -> str:
    return "\n".join(
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("type") in TEXT_PARTS and isinstance(p.get("text"), str)
    )


def _result_block(item: dict[str, Any], prefix: Path_) -> Block:
    call_id = item.get("call_id")
    cid = None if call_id is None else str(call_id)
    output = item.get("output")
    path = (*prefix, "output")
    if isinstance(output, str):
        inner = _inner_output(output)
        if inner is not None:
            return Block(Kind.TOOL_RESULT, inner, cid, slot=(path, "json_output"))
        return Block(Kind.TOOL_RESULT, output, cid, slot=(path, "str"))
    if isinstance(output, list):
        return Block(Kind.TOOL_RESULT, _text_of_parts(output), cid, slot=(path, "items"))
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return Block(Kind.TOOL_RESULT, output["content"], cid, slot=((*path, "content"), "str"))
    return Block(Kind.TOOL_RESULT, "", cid, slot=(path, "keep"))


def _encode(codec: str, old: Any, text: str) -> Any:
    """The new field value for a changed text (codecs of this format and the base's)."""
    if codec == "json_output":
        raw = old.encode("utf-8", "surrogatepass")
        parsed = loads_record(raw)
        # Re-encode like the original string (compact serde_json, UTF-8 kept as is),
        # the metadata's numbers with their original text.
        return dumps_like({**parsed, "output": text}, raw, parsed).decode("utf-8", "surrogatepass")
    if codec == "items":
        others = [p for p in old if not (isinstance(p, dict) and p.get("type") in TEXT_PARTS)]
        if not others:
            return text
        return [{"type": "input_text", "text": text}, *others]
    return encode_slot(codec, old, text)


@register_format
class Codex(Format):
    """OpenAI Codex CLI rollout JSONL."""

    name = "codex"
    client = "Codex"
    skips_invalid_lines = True
    incremental = True
    description = "OpenAI Codex CLI rollout JSONL ({timestamp, type, payload} per line)"

    def sniff(self, records: Sequence[Any]) -> bool:
        """Claim a rollout's envelopes ({timestamp, type, payload}) or its bare items."""
        if not records or not all(isinstance(r, dict) for r in records):
            return False
        if any(
            r.get("type") in ENVELOPE_TYPES and isinstance(r.get("payload"), dict) for r in records
        ):
            return True
        # Legacy rollout: a session header, then bare Responses items.
        first = records[0]
        header = "type" not in first and "id" in first and "timestamp" in first
        items = [r for r in records[1:] if "record_type" not in r]
        return header and bool(items) and all(r.get("type") in ITEM_TYPES for r in items)

    def to_message(self, data: Any, key: int, line: int, path: str) -> Message | None:
        """Read a response item as a message; events and metadata have none."""
        if not isinstance(data, dict):
            raise TranscriptError(path, line, "not a Codex rollout record (expected a JSON object)")
        item, prefix = _item(data)
        if item is None:
            return None
        itype = item.get("type")
        if itype == "message":
            role = item.get("role")
            role = ROLE.get(role, role) if isinstance(role, str) else "user"
            return Message(role, tuple(self._content_blocks(item, prefix)), key)
        if itype in CALLS:
            call_id = item.get("call_id", item.get("id"))
            name = item.get("name")
            if itype == "local_shell_call":
                name = name if isinstance(name, str) else "local_shell"
                text, slot = json_text(item.get("action")), ((*prefix, "action"), "json")
            else:
                field = "arguments" if itype == "function_call" else "input"
                value = item.get(field)
                text, slot = (value if isinstance(value, str) else ""), ((*prefix, field), "str")
            block = Block(
                Kind.TOOL_CALL,
                text,
                None if call_id is None else str(call_id),
                name if isinstance(name, str) else None,
                slot=slot,
            )
            return Message("assistant", (block,), key)
        if itype in OUTPUTS:
            return Message("tool", (_result_block(item, prefix),), key)
        if itype == "reasoning":
            blocks = []
            for field in ("summary", "content"):
                parts = item.get(field)
                if not isinstance(parts, list):
                    continue
                for i, part in enumerate(parts):
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        # Reasoning is never rewritten: it belongs to encrypted_content.
                        blocks.append(
                            Block(Kind.THINKING, part["text"], slot=((*prefix, field, i), "keep"))
                        )
            if not blocks:  # encrypted only: still reasoning a stage may clear
                blocks.append(
                    Block(Kind.THINKING, "", slot=((*prefix, "encrypted_content"), "keep"))
                )
            return Message("assistant", tuple(blocks), key)
        return None

    @staticmethod
    def _content_blocks(item: dict[str, Any], prefix: Path_) -> list[Block]:
        content = item.get("content")
        if isinstance(content, str):
            return [Block(Kind.TEXT, content, slot=((*prefix, "content"), "str"))]
        if not isinstance(content, list):
            return []
        blocks = []
        for i, part in enumerate(content):
            ptype = part.get("type") if isinstance(part, dict) else None
            path = (*prefix, "content", i)
            if ptype in TEXT_PARTS and isinstance(part.get("text"), str):
                blocks.append(Block(Kind.TEXT, part["text"], slot=((*path, "text"), "str")))
            elif ptype in ("input_image", "image"):
                blocks.append(Block(Kind.IMAGE, slot=(path, "keep")))
            else:
                blocks.append(Block(Kind.OTHER, slot=(path, "keep")))
        return blocks

    def build(
        self, raw: Input, path: str, records: list[Record], *, whole_texts: bool = False
    ) -> Document:
        """Refuse a record that is not a rollout's; group each model response's items."""
        require_recognised(
            records, path, _is_codex, "a Codex rollout record ({timestamp, type, payload})"
        )
        doc = super().build(raw, path, records, whole_texts=whole_texts)
        # One model response = the run of assistant items up to the next other message.
        messages = list(doc.conversation.messages)
        group: str | None = None
        for i, msg in enumerate(messages):
            if msg.role != "assistant":
                group = None
                continue
            assert msg.key is not None
            if group is None:
                group = f"response@{records[msg.key].line}"
            if msg.group != group:  # a kept prefix's messages come grouped already
                messages[i] = replace(msg, group=group)
                records[msg.key].message = messages[i]
        doc.conversation = doc.conversation.with_messages(messages)
        return doc

    def apply(self, data: Any, old: Message, new: Message) -> Any:
        """Write ``new``'s changed blocks into the item, each in its own slot."""
        old_by_slot = {b.slot: b for b in old.blocks if b.slot is not None}
        for block in new.blocks:
            before = old_by_slot.get(block.slot) if block.slot is not None else None
            if before is None or before.text == block.text:
                continue
            field_path, codec = block.slot
            if codec == "keep":
                continue  # reasoning, images, opaque outputs are never rewritten
            data = set_in(data, field_path, _encode(codec, get_in(data, field_path), block.text))
        item, prefix = _item(data)
        if item is None or item.get("type") != "message":
            return data
        # Message parts a stage removed go; text blocks it added are appended.
        kept = {b.slot for b in new.blocks}
        gone = [
            b.slot[0][len(prefix) + 1]
            for b in old.blocks
            if b.slot not in kept and len(b.slot[0]) > len(prefix) + 1
        ]
        if gone:
            data = delete_many(data, (*prefix, "content"), gone)
        added = [b for b in new.blocks if b.slot is None or b.slot not in old_by_slot]
        if added and isinstance(get_in(data, (*prefix, "content")), list):
            part = "output_text" if item.get("role") == "assistant" else "input_text"
            extra = [{"type": part, "text": b.text} for b in added if b.kind is Kind.TEXT]
            data = set_in(data, (*prefix, "content"), [*get_in(data, (*prefix, "content")), *extra])
        return data

    def new_record(self, message: Message, neighbour: Any) -> Any:
        """Make a message item for a message a stage added."""
        role = {"system": "developer", "tool": "user"}.get(message.role, message.role)
        part = "output_text" if role == "assistant" else "input_text"
        text = "\n".join(b.text for b in message.blocks if b.kind is not Kind.TOOL_CALL)
        item = {"type": "message", "role": role, "content": [{"type": part, "text": text}]}
        near = neighbour if isinstance(neighbour, dict) else {}
        if "payload" not in near and near.get("type") in ITEM_TYPES:
            return item  # legacy rollout: bare items
        record: dict[str, Any] = {}
        if "timestamp" in near:
            record["timestamp"] = near["timestamp"]
        record["type"] = "response_item"
        record["payload"] = item
        return record

    def fixup(self, plan: list[OutRecord]) -> None:
        """Drop the items a stage emptied."""
        # An item whose only block a stage removed (a call, an output) is dropped.
        drop_emptied(plan)

    def keep_passthrough(self, record: Record, anchor_kept: bool) -> bool:
        """Keep the session metadata and the legacy header; other records follow their message."""
        data = record.data
        if isinstance(data, dict):
            if data.get("type") == "session_meta":
                return True
            if "type" not in data and "id" in data and "timestamp" in data:
                return True  # legacy session header
        return anchor_kept
