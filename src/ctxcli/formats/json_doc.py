"""Whole JSON documents that hold a list of OpenAI-style messages (not JSONL).

Three layouts are recognised:

- a top-level array of ``{role, content, tool_calls?, tool_call_id?}`` messages;
- an object with ``messages`` (mini-swe-agent ``*.traj.json``): it adds a final
  ``role: "exit"`` message holding the submitted diff (not sent to the model: passed
  through and always kept) and ``extra`` fields duplicating each message
  (``extra.raw_output`` is the untruncated tool output; it is dropped when a stage
  shortens that output, so the file really shrinks);
- an object with ``history`` (SWE-agent ``*.traj``): ``role: "tool"`` messages name
  their call through a ``tool_call_ids`` *list*.

Messages are read with the OpenAI chat rules (:mod:`.openai_chat`). Each message is
one unit of the plan, as a line is for JSONL formats, and the output is the same
document with only the message list changed: unchanged messages keep their exact
original text, changed ones are written in the document's own style (indent and
``ensure_ascii`` detected from the file), and a document nothing changed in is
output byte-for-byte. The whole document is one restore unit: a changed output is
restored from its original bytes kept in the pack.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxcli.core.errors import Remedy, TranscriptError
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.core.restore import OriginalsSink, RestoreScript
from ctxcli.formats.anthropic import changed_result_ids, drop_emptied
from ctxcli.formats.base import (
    BOM,
    Document,
    Format,
    OutRecord,
    Record,
    State,
    dumps_like,
    loads_record,
    style_of,
)
from ctxcli.formats.jsontext import Style, dumps_keeping
from ctxcli.formats.jsontext import item_spans as _item_spans
from ctxcli.formats.jsontext import member_span as _member_span
from ctxcli.formats.jsontext import skip_value as _skip_value
from ctxcli.formats.jsontext import skip_ws as _skip_ws
from ctxcli.formats.openai_chat import OpenAIChat

LIST_KEYS = ("messages", "history")
PASSTHROUGH_ROLES = {"exit"}

_NON_SPACE = re.compile(rb"\S")


def _is_jsonl(body: bytes) -> bool:
    """True if the first line is a whole JSON value and more follows: JSONL, not a document.

    Checked first because the whole-document parse of a JSONL file fails only after
    the stdlib fallback has decoded all of it (seconds and gigabytes on a large file).
    """
    end = body.find(b"\n")
    if end == -1 or _NON_SPACE.search(body, end + 1) is None:
        return False
    try:
        loads_record(body[:end])
    except (ValueError, RecursionError):
        return False
    return True


@dataclass
class Layout:
    """Where the message list sits in the document and how the document is written."""

    lead: bytes  # a BOM, if any
    head: str  # the document before the list
    tail: str  # the document after the list
    seps: list[str]
    indent: str | None  # per-level indent of a pretty-printed document
    item_indent: str  # indentation of an item's first line
    newline: str  # "\n", or "\r\n" for a document written on Windows
    ensure_ascii: bool
    sample: bytes  # one original item, for compact documents

    def dump_item(self, value: Any, original: Record | None = None) -> str:
        """A changed or new message in the document's style.

        A changed message keeps the original text of every value the change left
        alone (numbers above all), as a changed JSONL record does.
        """
        if self.indent is None:
            style = self.sample if not self.ensure_ascii else self.sample + b"\\u"
            if original is not None:
                text = bytes(original.raw).decode("utf-8", "surrogatepass")
                return dumps_keeping(value, original.data, text, style_of(style))
            return dumps_like(value, style).decode("utf-8", "surrogatepass")
        if original is not None:
            pretty = Style(
                ", ", ": ", self.ensure_ascii, self.indent, self.newline, self.item_indent
            )
            text = bytes(original.raw).decode("utf-8", "surrogatepass")
            return dumps_keeping(value, original.data, text, pretty)
        text = json.dumps(value, indent=self.indent, ensure_ascii=self.ensure_ascii)
        return text.replace("\n", self.newline + self.item_indent)

    def join(self, items: list[str], same_layout: bool) -> str:
        """The list text holding ``items`` (original separators where they still fit)."""
        if not items:
            return "[]"
        if same_layout:
            parts = [self.seps[0]]
            for i, item in enumerate(items):
                parts.append(item)
                parts.append(self.seps[i + 1])
            return "[" + "".join(parts) + "]"
        between = self.seps[1] if len(self.seps) > 2 else "," + self.seps[0]
        return "[" + self.seps[0] + between.join(items) + self.seps[-1] + "]"


def _message_list(value: Any, *, allow_empty: bool = False) -> str | None:
    """The key of the message list (``""`` for a top-level array), or None.

    An empty list proves nothing when guessing the format; with ``--format json_doc``
    (``allow_empty``) it is a document whose messages were all dropped.
    """

    def is_messages(items: Any) -> bool:
        return (
            isinstance(items, list)
            and (allow_empty or bool(items))
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in items)
        )

    if isinstance(value, list):
        return "" if is_messages(value) else None
    if isinstance(value, dict):
        for key in LIST_KEYS:
            if is_messages(value.get(key)):
                return key
    return None


def _layout(
    text: str, lead: bytes, start: int, end: int, seps: list[str], items: list[str]
) -> Layout:
    first_sep = seps[0]
    pretty = "\n" in first_sep
    item_indent = first_sep.rsplit("\n", 1)[-1] if pretty else ""
    indent: str | None = None
    if pretty:
        for item in items:
            m = re.match(r"[\[{]\r?\n([ \t]*)", item)
            if m and m.group(1).startswith(item_indent) and len(m.group(1)) > len(item_indent):
                indent = m.group(1)[len(item_indent) :]
                break
        if not indent:
            indent = "  "
    ascii_doc = text.isascii()
    return Layout(
        lead=lead,
        head=text[:start],
        tail=text[end:],
        seps=seps,
        indent=indent,
        item_indent=item_indent,
        newline="\r\n" if "\r\n" in first_sep else "\n",
        ensure_ascii=ascii_doc,
        sample=items[0].encode("utf-8", "surrogatepass") if items else b"",
    )


class JsonDocument(Format):
    """A JSON document holding a message list (mini-swe-agent, SWE-agent, arrays)."""

    name = "json_doc"
    description = (
        "JSON document with a message list: [messages], {messages: [...]}, {history: [...]}"
    )
    units = "document"

    _chat = OpenAIChat()

    def sniff(self, records: Sequence[Any]) -> bool:
        # Documents are found by try_load_document; a one-line document also sniffs.
        return len(records) == 1 and _message_list(records[0]) is not None

    # -- loading --------------------------------------------------------------------

    def try_load_document(
        self, raw: bytes, path: str, *, allow_empty: bool = False
    ) -> Document | None:
        """The document in ``raw``, or None if ``raw`` is not one (JSONL, other JSON)."""
        lead = BOM if raw.startswith(BOM) else b""
        body = raw[len(lead) :]
        stripped = body.lstrip()
        if not stripped or stripped[:1] not in (b"[", b"{"):
            return None
        if _is_jsonl(stripped):
            return None
        try:
            value = loads_record(body)
            text = body.decode("utf-8")
        except (ValueError, RecursionError):
            return None  # JSONL (several values), or not JSON at all
        key = _message_list(value, allow_empty=allow_empty)
        if key is None:
            return None
        if key:
            span = _member_span(text, key)
            assert span is not None
            start, end = span
            items = value[key]
        else:
            start = _skip_ws(text, 0)
            end = _skip_value(text, start)
            items = value
        spans, seps = _item_spans(text, start)
        records: list[Record] = []
        line, counted = 1, 0
        for (s, e), data in zip(spans, items, strict=True):
            line += text.count("\n", counted, s)
            counted = s
            records.append(Record(text[s:e].encode("utf-8", "surrogatepass"), line, data))
        doc = self.build(raw, path, records)
        doc.extra["layout"] = _layout(text, lead, start, end, seps, [text[s:e] for s, e in spans])
        return doc

    def load(self, raw: bytes, path: str, *, on_invalid: str = "auto") -> Document:
        doc = self.try_load_document(raw, path, allow_empty=True)
        if doc is None:
            raise TranscriptError(
                path,
                None,
                "not a JSON document holding messages (expected an array of {role} "
                'messages or an object with a "messages" or "history" list)',
                remedy=Remedy.CHECK_FORMAT,
            )
        return doc

    def to_message(self, data: Any, key: int, line: int, path: str) -> Message | None:
        if not isinstance(data, dict) or not isinstance(data.get("role"), str):
            return None
        role = data["role"]
        if role in PASSTHROUGH_ROLES:
            return None
        ids = data.get("tool_call_ids")
        if role == "tool" and "tool_call_id" not in data and isinstance(ids, list) and ids:
            # SWE-agent: one observation answers the listed calls (usually one).
            msg = self._chat.to_message({**data, "tool_call_id": ids[0]}, key, line, path)
            assert msg is not None
            extra = [
                Block(Kind.TOOL_RESULT, "", str(cid), slot=(("tool_call_ids", k), "keep"))
                for k, cid in enumerate(ids[1:], start=1)
            ]
            return msg.with_blocks([*msg.blocks, *extra])
        return self._chat.to_message(data, key, line, path)

    # -- writing back ---------------------------------------------------------------

    def apply(self, data: Any, old: Message, new: Message) -> Any:
        def plain(msg: Message) -> Message:
            return msg.with_blocks(
                [
                    b
                    for b in msg.blocks
                    if b.slot is None or b.slot[1] != "keep" or b.kind is not Kind.TOOL_RESULT
                ]
            )

        out = self._chat.apply(data, plain(old), plain(new))
        extra = out.get("extra") if isinstance(out, dict) else None
        if isinstance(extra, dict) and "raw_output" in extra and changed_result_ids(old, new):
            # mini-swe-agent keeps the untruncated output here; the original is in the pack.
            out = {**out, "extra": {k: v for k, v in extra.items() if k != "raw_output"}}
        return out

    def new_record(self, message: Message, neighbour: Any) -> Any:
        record: dict[str, Any] = {"role": message.role, "content": message.text}
        if isinstance(neighbour, dict) and "agent" in neighbour:
            record["agent"] = neighbour["agent"]  # SWE-agent tags every history entry
        return record

    def fixup(self, plan: list[OutRecord]) -> None:
        drop_emptied(plan)

    def keep_passthrough(self, record: Record, anchor_kept: bool) -> bool:
        if isinstance(record.data, dict) and record.data.get("role") in PASSTHROUGH_ROLES:
            return True  # the submission stays with the trajectory
        return anchor_kept

    def dump(
        self, doc: Document, conv: Conversation, blobs: OriginalsSink
    ) -> tuple[bytes, RestoreScript]:
        """The document with its new message list; one restore unit for the whole file."""
        plan = self.plan(doc, conv)
        script = RestoreScript()
        if all(r.state is State.COPY for r in plan):
            script.copy()
            return doc.raw, script
        layout: Layout = doc.extra["layout"]
        same_layout = all(r.state in (State.COPY, State.CHANGED) for r in plan)
        items = []
        for rec in plan:
            if rec.state is State.DROPPED:
                continue
            if rec.state is State.COPY and rec.orig is not None:
                items.append(bytes(rec.orig.raw).decode("utf-8", "surrogatepass"))
            else:
                try:
                    items.append(layout.dump_item(rec.data, rec.orig))
                except (ValueError, RecursionError) as exc:
                    raise TranscriptError(
                        doc.path,
                        rec.orig.line if rec.orig is not None else None,
                        f"cannot write the changed message as JSON ({exc}); "
                        "leave it out of the reduction or fix the value",
                    ) from None
        text = layout.head + layout.join(items, same_layout) + layout.tail
        script.original(blobs.add_original(doc.raw))
        script.skip()
        return layout.lead + text.encode("utf-8", "surrogatepass"), script
