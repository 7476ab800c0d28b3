"""Whole JSON documents that hold a list of OpenAI-style messages (not JSONL).

Three layouts are recognised:

- a top-level array of ``{role, content, tool_calls?, tool_call_id?}`` messages;
- an object with ``messages`` (mini-swe-agent ``*.traj.json``): it adds a final
  ``role: "exit"`` message holding the submitted diff (not sent to the model: passed
  through and always kept) and ``extra`` fields duplicating each message
  (``extra.raw_output`` is the untruncated tool output; it is dropped when a stage
  shortens that output, so the file really shrinks);
- an object with ``history`` (SWE-agent ``*.traj``): ``role: "tool"`` messages name
  their call through a ``tool_call_ids`` *list* (v1, function calling). In v0 files the
  model writes its command in a code fence, ``history[].action`` holds it, and the
  observation comes back as the next ``role: "user"`` message: ctx reads that pair as a
  tool call and its result, so tool-output stages apply. SWE-agent also copies the
  history into every ``trajectory[i].messages`` (and each output into
  ``trajectory[i].observation``): those copies are rewritten like the history, so the
  file really shrinks.

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ctxcli.core.errors import (
    DEFAULT_ON_INVALID,
    OnInvalid,
    PrefixChanged,
    Remedy,
    TranscriptError,
)
from ctxcli.core.io import Input
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.core.protocols import OriginalsSink, RestoreScript
from ctxcli.formats.collection import first_value
from ctxcli.formats.fixups import changed_result_ids, drop_emptied
from ctxcli.formats.format import Document, Format, OutRecord, State
from ctxcli.formats.jsontext import Style, dumps_keeping, dumps_like, loads_record, style_of
from ctxcli.formats.jsontext import item_spans as _item_spans
from ctxcli.formats.jsontext import member_span as _member_span
from ctxcli.formats.jsontext import skip_value as _skip_value
from ctxcli.formats.jsontext import skip_ws as _skip_ws
from ctxcli.formats.lines import BOM, Record, Writable
from ctxcli.formats.openai_chat import OpenAIChat
from ctxcli.formats.registry import register_format

__all__ = [
    "COPIES_KEY",
    "JsonDocument",
    "LIST_KEYS",
    "Layout",
    "PASSTHROUGH_ROLES",
    "SWE_FOOTER",
    "V0_CALL",
    "is_jsonl",
    "layout_from",
]

LIST_KEYS = ("messages", "history")
PASSTHROUGH_ROLES = {"exit"}
COPIES_KEY = "trajectory"  # SWE-agent: steps repeating the history and the outputs
SWE_FOOTER = "\n(Open file:"
V0_CALL = "swe_v0"  # the codec of the tool-call block ctx reads from a v0 ``action``

_NON_SPACE = re.compile(rb"\S")


def is_jsonl(raw: Input) -> bool:
    """True if the first line is a whole JSON value and more follows: JSONL, not a document.

    Checked first because the whole-document parse of a JSONL file fails only after
    the stdlib fallback has decoded all of it (seconds and gigabytes on a large file).
    Only the first line is read (a mapped input is not copied).
    """
    start = first_value(raw)
    if start < 0 or raw[start : start + 1] not in (b"[", b"{"):
        return False
    end = raw.find(b"\n", start)
    if end == -1 or _NON_SPACE.search(raw, end + 1) is None:
        return False
    try:
        loads_record(raw[start:end])
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

    def dump_value(self, value: Any, indent: str) -> str:
        """Any value in the document's style, its later lines indented by ``indent``."""
        if self.indent is None:
            return self.dump_item(value)
        text = json.dumps(value, indent=self.indent, ensure_ascii=self.ensure_ascii)
        return text.replace("\n", self.newline + indent)

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
    sample = items[0].encode("utf-8", "surrogatepass") if items else b""
    return layout_from(lead, text[:start], text[end:], seps, items, text.isascii(), sample)


def layout_from(
    lead: bytes,
    head: str,
    tail: str,
    seps: list[str],
    item_heads: Iterable[str],
    ascii_doc: bool,
    sample: bytes,
) -> Layout:
    """Work out the layout of a list of items.

    The layout of a list of items; ``item_heads`` are the items' texts or their
    first lines (only where their first member starts is read).
    """
    first_sep = seps[0]
    pretty = "\n" in first_sep
    item_indent = first_sep.rsplit("\n", 1)[-1] if pretty else ""
    indent: str | None = None
    if pretty:
        for item in item_heads:
            m = re.match(r"[\[{]\r?\n([ \t]*)", item)
            if m and m.group(1).startswith(item_indent) and len(m.group(1)) > len(item_indent):
                indent = m.group(1)[len(item_indent) :]
                break
        if not indent:
            indent = "  "
    return Layout(
        lead=lead,
        head=head,
        tail=tail,
        seps=seps,
        indent=indent,
        item_indent=item_indent,
        newline="\r\n" if "\r\n" in first_sep else "\n",
        ensure_ascii=ascii_doc,
        sample=sample,
    )


@register_format
class JsonDocument(Format):
    """A JSON document holding a message list (mini-swe-agent, SWE-agent, arrays)."""

    name = "json_doc"
    description = (
        "JSON document with a message list: [messages], {messages: [...]}, {history: [...]}"
    )
    units = "document"

    _chat = OpenAIChat()

    def __init__(self, v0_results: Mapping[int, int] | None = None) -> None:
        # SWE-agent v0: key of an observation -> key of the action message it answers.
        # A document of that kind is built by its own instance of the format.
        self.v0_results = dict(v0_results or {})
        self.v0_calls = set(self.v0_results.values())

    def sniff(self, records: Sequence[Any]) -> bool:
        """Claim a one-line file holding a message list."""
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
        if is_jsonl(raw):
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
        fmt = self
        if key == "history":
            v0 = _v0_results(items)
            if v0:
                fmt = JsonDocument(v0)
        doc = fmt.build(raw, path, records)
        doc.extra["layout"] = _layout(text, lead, start, end, seps, [text[s:e] for s, e in spans])
        if key == "history" and isinstance(value.get(COPIES_KEY), list):
            copies = _member_span(text, COPIES_KEY)
            assert copies is not None
            doc.extra["copies"] = (copies, (start, end), value[COPIES_KEY])
        return doc

    def load(
        self, raw: Input, path: str, *, on_invalid: OnInvalid = DEFAULT_ON_INVALID
    ) -> Document:
        """Load a JSON document that holds a message list."""
        doc = self.try_load_document(raw[:], path, allow_empty=True)
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
        """Read a message item as a message; the submission and other roles have none."""
        if not isinstance(data, dict) or not isinstance(data.get("role"), str):
            return None
        role = data["role"]
        if role in PASSTHROUGH_ROLES:
            return None
        if key in self.v0_results:
            action = self.v0_results[key]
            return Message(
                "tool",
                (
                    Block(
                        Kind.TOOL_RESULT,
                        data["content"],
                        f"swe-{action}",
                        _command_name(data.get("action")),
                        slot=(("content",), "str"),
                    ),
                ),
                key,
            )
        if key in self.v0_calls:
            msg = self._chat.to_message(data, key, line, path)
            assert msg is not None
            call = Block(
                Kind.TOOL_CALL,
                data["action"],
                f"swe-{key}",
                _command_name(data["action"]),
                slot=(("action",), V0_CALL),
            )
            return msg.with_blocks([*msg.blocks, call])
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
        """Write ``new``'s changed texts into the message item."""

        def plain(msg: Message) -> Message:
            # Blocks ctx made up (extra result ids, a v0 action read as a call) have no
            # field of their own to write: the action stays as the model wrote it.
            return msg.with_blocks(
                [
                    b
                    for b in msg.blocks
                    if b.slot is None
                    or (b.slot[1] != "keep" or b.kind is not Kind.TOOL_RESULT)
                    and b.slot[1] != V0_CALL
                ]
            )

        out = self._chat.apply(data, plain(old), plain(new))
        extra = out.get("extra") if isinstance(out, dict) else None
        if isinstance(extra, dict) and "raw_output" in extra and changed_result_ids(old, new):
            # mini-swe-agent keeps the untruncated output here; the original is in the pack.
            out = {**out, "extra": {k: v for k, v in extra.items() if k != "raw_output"}}
        return out

    def new_record(self, message: Message, neighbour: Any) -> Any:
        """Make a message item for a message a stage added."""
        record: dict[str, Any] = {"role": message.role, "content": message.text}
        if isinstance(neighbour, dict) and "agent" in neighbour:
            record["agent"] = neighbour["agent"]  # SWE-agent tags every history entry
        return record

    def fixup(self, plan: list[OutRecord]) -> None:
        """Drop the message items a stage emptied."""
        drop_emptied(plan)

    def keep_passthrough(self, record: Record, anchor_kept: bool) -> bool:
        """Keep the submission with the trajectory; other records follow their message."""
        if isinstance(record.data, dict) and record.data.get("role") in PASSTHROUGH_ROLES:
            return True  # the submission stays with the trajectory
        return anchor_kept

    def dump(
        self,
        doc: Document,
        conv: Conversation,
        blobs: OriginalsSink,
        *,
        start: int = 0,
        into: Writable | None = None,
    ) -> tuple[bytes, RestoreScript]:
        """The document with its new message list; one restore unit for the whole file.

        Never part of an incremental re-run (``start`` is always 0): the document is
        one unit. It is made whole, then written ``into`` when given.
        """
        out, script = self._dump(doc, conv, blobs, start)
        if into is None:
            return out, script
        into.write(out)
        return b"", script

    def _dump(
        self, doc: Document, conv: Conversation, blobs: OriginalsSink, start: int = 0
    ) -> tuple[bytes, RestoreScript]:
        if start:
            raise PrefixChanged("a JSON document is one unit: it keeps no prefix")
        plan = self.plan(doc, conv)
        script = RestoreScript()
        if all(r.state is State.COPY for r in plan):
            script.copy()
            return doc.raw[:], script  # a document is always held as bytes
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
        if "copies" in doc.extra:
            text = _rewrite_copies(text, layout, doc.extra["copies"], plan)
        script.original(blobs.add_original(doc.raw[:]))
        script.skip()
        return layout.lead + text.encode("utf-8", "surrogatepass"), script


# --- SWE-agent ------------------------------------------------------------------------


def _command_name(action: Any) -> str | None:
    """The command an action runs (``open``, ``edit``, ``python``...)."""
    if not isinstance(action, str) or not action.strip():
        return None
    return action.split(None, 1)[0]


def _v0_results(history: list[Any]) -> dict[int, int]:
    """SWE-agent v0: which user message is the observation of which action message.

    v0 history has no ``tool`` role and no ``tool_calls``: an assistant message with an
    ``action`` is answered by the ``user`` message right after it (demonstrations,
    marked ``is_demo``, are text).
    """
    if any(
        isinstance(m, dict) and (m.get("role") == "tool" or m.get("tool_calls")) for m in history
    ):
        return {}
    links: dict[int, int] = {}
    for i in range(1, len(history)):
        prev, cur = history[i - 1], history[i]
        if (
            isinstance(prev, dict)
            and isinstance(cur, dict)
            and prev.get("role") == "assistant"
            and _command_name(prev.get("action")) is not None
            and not prev.get("is_demo")
            and cur.get("role") == "user"
            and not cur.get("is_demo")
            and isinstance(cur.get("content"), str)
        ):
            links[i] = i - 1
    return links


def _canonical(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode("utf-8", "surrogatepass")


def _rewrite_copies(
    text: str,
    layout: Layout,
    copies: tuple[tuple[int, int], tuple[int, int], list[Any]],
    plan: list[OutRecord],
) -> str:
    """Rewrite ``trajectory[i].messages`` and ``.observation`` like the history was.

    A copy is replaced when it equals a history message that changed (dropped ones are
    left out); an observation when it equals a tool output that changed.
    """
    (start, end), (list_start, list_end), steps = copies
    changed, outputs = _changes(plan)
    new_steps, touched = [], False
    for step in steps:
        new_step = _rewritten_step(step, changed, outputs) if isinstance(step, dict) else step
        touched = touched or new_step is not step
        new_steps.append(new_step)
    if not touched:
        return text
    line_start = text.rfind("\n", 0, start) + 1
    indent = re.match(r"[ \t]*", text[line_start:start])
    dumped = layout.dump_value(new_steps, indent.group() if indent else "")
    # The history was rewritten in ``text``; find the copies' span again from its edges.
    if end <= list_start:
        return text[:start] + dumped + text[end:]
    shift = len(text) - (len(layout.head) + len(layout.tail)) - (list_end - list_start)
    return text[: start + shift] + dumped + text[end + shift :]


def _changes(plan: list[OutRecord]) -> tuple[dict[bytes, Any], dict[str, str]]:
    """Find the history messages and the tool outputs that changed.

    The history messages that changed (their new value, None if dropped), by their
    canonical form; and the tool outputs that changed, old text to new.
    """
    changed: dict[bytes, Any] = {}
    outputs: dict[str, str] = {}
    for rec in plan:
        if rec.orig is None or rec.state is State.COPY or not isinstance(rec.orig.data, dict):
            continue
        dropped = rec.state is State.DROPPED
        changed[_canonical(rec.orig.data)] = None if dropped else rec.data
        old = rec.orig.data.get("content")
        new = None if dropped or not isinstance(rec.data, dict) else rec.data.get("content")
        if isinstance(old, str) and isinstance(new, str) and old != new:
            outputs[old] = new
            # SWE-agent's observation is the tool output without the prompt footer
            # ("\n(Open file: ...)\n(Current directory: ...)\nbash-$") it adds.
            footer = old.rfind(SWE_FOOTER)
            if footer > 0:
                outputs.setdefault(old[:footer], new)
    return changed, outputs


def _rewritten_step(
    step: dict[str, Any], changed: dict[bytes, Any], outputs: dict[str, str]
) -> dict[str, Any]:
    """Bring ``step``'s message copies and observation in line with the history.

    ``step`` with its message copies and observation as the history now has them
    (the very object when nothing in it changed).
    """
    new_step = step
    msgs = step.get("messages")
    if isinstance(msgs, list) and msgs:
        kept, hit = [], False
        for m in msgs:
            c = _canonical(m) if isinstance(m, dict) else b""
            if c in changed:
                hit = True
                if changed[c] is not None:
                    kept.append(changed[c])
            else:
                kept.append(m)
        if hit:
            new_step = {**new_step, "messages": kept}
    obs = step.get("observation")
    if isinstance(obs, str) and obs in outputs:
        new_step = {**new_step, "observation": outputs[obs]}
    return new_step
