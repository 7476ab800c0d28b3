"""What breaks resuming a client's session: the rules ``ctx doctor`` adds to the engine's.

``ctx doctor`` runs :func:`rules_for` a file: the transcript rules every file is held to
(:data:`~ctxcli.formats.diagnose.TRANSCRIPT_RULES`, what ``ctx validate`` runs), then the
rules of the client that wrote it. Claude Code: a ``parentUuid`` or ``logicalParentUuid``
naming no record (or a line the client cannot parse), a second root in one chain, empty
text blocks and thinking without a signature (the API rejects both), a chain that starts
at an assistant turn (the API answers 400), one ``toolUseResult`` payload stored twice (a
warning), a base64 image or PDF stored again, a ``toolUseResult`` held as JSON text that
no longer parses, lines over a size limit. Codex: lines over the size limit, records
over 16 MiB, and a saved context size that makes Codex compact a resume at once although
the history it rebuilds is far smaller (:func:`stale_saved_context`). :data:`CHECKS`
names, per kind of problem, the client behaviour it guards against and how that was
confirmed. A third client adds its format (``formats/``) and its rules here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctxcli.formats.claude_code import is_chain_restart, is_compact_boundary, resume_chain
from ctxcli.formats.clients import ClientFile
from ctxcli.formats.diagnose import TRANSCRIPT_RULES, Limits, Problem, Rule
from ctxcli.formats.lines import Record

__all__ = [
    "ATTACHMENT_MIN_CHARS",
    "CHECKS",
    "CODEX_MAX_RECORD_BYTES",
    "SavedContext",
    "codex_auto_compact_limit",
    "stale_saved_context",
    "attachment_key",
    "record_attachments",
    "unparseable_payload",
    "CLIENT_RULES",
    "DUP_MIN_BYTES",
    "UUID_RE",
    "blocks_of",
    "is_blank_text",
    "is_message",
    "payload_key",
    "rules_for",
    "visible_groups",
]

CHECKS: dict[str, str] = {
    "torn_last_line": "the client skips a line that is not JSON, so the newest record is "
    "lost (how the client reads lines: tests/e2e/test_e2e_claude_code.py, malformed line)",
    "malformed_line": "the client skips a line that is not JSON and its record leaves the "
    "chain (reproduced: the real CLI on cc_mclaude_c76e5be5 line 859, "
    "tests/e2e/test_e2e_claude_code.py)",
    "dangling_parent": "a resume walks parentUuid back from the last record and stops at a "
    "uuid no record has, so everything older is lost to the model",
    "dangling_logical_parent": "logicalParentUuid naming no record (the UI follows it)",
    "extra_root": "a resume walks parentUuid up to a null: a second root cuts the "
    "conversation in two",
    "chain_starts_with_assistant": "the API answers 400 'first message must use the user "
    "role' (reproduced: the real CLI sends such a chain, tests/e2e/test_e2e_claude_code.py)",
    "unanswered_call": "the API answers 400 for a tool_use without its tool_result "
    "(the rule in ctxcli.proxy.rules, which the fake API enforces)",
    "orphan_result": "the API answers 400 for a tool_result without its tool_use "
    "(ctxcli.proxy.rules)",
    "empty_text": "the API answers 400 for an empty text block (ctxcli.proxy.rules)",
    "unsigned_thinking": "the API answers 400 for a thinking block without a signature "
    "(ctxcli.proxy.rules)",
    "duplicate_tool_use_result": "a toolUseResult stored again costs bytes to load (a warning)",
    "oversized_line": "a multi-megabyte line freezes claude --resume (reported: "
    "anthropics/claude-code#24118, a 12 MB tool_result line); a 12 MB line resumes once "
    "repaired, in the real CLI (tests/e2e/test_e2e_uncompact.py)",
    "repeated_attachment": "the client sends every stored copy of a base64 image or PDF "
    "(reported: anthropics/claude-code#67080, each PDF stored twice, 36.8 MB, would not "
    "resume; reproduced: the real CLI sends all eight copies of one PDF, one once repaired, "
    "tests/e2e/test_e2e_uncompact.py)",
    "codex_record_over_16mib": "Codex's state migration drops records over 16 MiB "
    "(reported: openai/codex#44141; not reproduced here)",
    "codex_stale_token_count": "Codex restores the last token_count's "
    "last_token_usage.total_tokens as the context size on resume and compacts before the "
    "first turn when it is at least 90% of the model's window, so a stale or impossible "
    "figure (reported: openai/codex#24089, figures above the window) compacts a short "
    "history (reproduced: codex 0.169 sends a compaction request first at 244,800 saved "
    "tokens of a 258,400 window, not at 244,799, and none once repaired, "
    "tests/e2e/test_e2e_codex.py)",
    "unparseable_tool_use_result": "Claude Code's TaskOutput renderer JSON.parses a "
    "toolUseResult held as JSON text on resume (reported in ctx issue 43; not reproduced "
    "here)",
}
"""Each kind of problem, with the client behaviour it guards against and how it was confirmed."""


DUP_MIN_BYTES = 1024
"""A ``toolUseResult`` payload this large or larger stored twice is reported."""
UUID_RE = re.compile(rb'"uuid"\s*:\s*"([^"\\]+)"')


def blocks_of(data: dict[str, Any]) -> list[Any]:
    """The content blocks of a Claude Code record's message (none for a string)."""
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def is_message(data: Any) -> bool:
    """True for a Claude Code ``user`` or ``assistant`` record with a message."""
    return (
        isinstance(data, dict)
        and data.get("type") in ("user", "assistant")
        and isinstance(data.get("message"), dict)
    )


def visible_groups(datas: Iterable[Any]) -> set[Any]:
    r"""``message.id`` of the responses that hold some non-blank content.

    The client merges the records of one response into one message and drops a
    whitespace-only text block beside other content (real 2.1.x files hold "\n\n"
    blocks before a tool call and resume); only a response with nothing else, or a
    block with no text at all, reaches the API as an empty text block.
    """
    out: set[Any] = set()
    for data in datas:
        if not is_message(data):
            continue
        for block in blocks_of(data):
            if isinstance(block, dict) and not (
                block.get("type") == "text" and not str(block.get("text") or "").strip()
            ):
                out.add(data["message"].get("id"))
    out.discard(None)
    return out


def is_blank_text(block: dict[str, Any], data: dict[str, Any], visible: Container[Any]) -> bool:
    """True for a text block the API receives empty (see :func:`visible_groups`)."""
    text = block.get("text")
    if not isinstance(text, str) or text == "":
        return True
    if text.strip():
        return False
    return data["message"].get("id") not in visible


def payload_key(data: dict[str, Any]) -> tuple[bytes, int] | None:
    """A record's ``toolUseResult``, if large enough to count: its digest and size.

    The sha256 of its canonical JSON, and that JSON's size; a digest, not the JSON: the
    payloads are a large part of a session, and the rule and the repair that look for
    repeats keep a key for each one.
    """
    payload = data.get("toolUseResult")
    if payload is None:
        return None
    key = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    return (hashlib.sha256(key).digest(), len(key)) if len(key) >= DUP_MIN_BYTES else None


# -- attachments and payloads --------------------------------------------------------------

ATTACHMENT_MIN_CHARS = 1024
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
CODEX_MAX_RECORD_BYTES = 16 * 1024 * 1024
"""Codex's state migration drops a record over 16 MiB (openai/codex#44141)."""

Attachment = tuple[Any, Any, str, str, bool]
"""Where a base64 attachment sits: (container, key, data, media type, is a block)."""


def _is_base64(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) >= ATTACHMENT_MIN_CHARS
        and _BASE64.fullmatch(value[:4096]) is not None
    )


def _is_base64_block(item: Any) -> bool:
    if not isinstance(item, dict) or item.get("type") not in ("image", "document"):
        return False
    source = item.get("source")
    return (
        isinstance(source, dict)
        and source.get("type") == "base64"
        and _is_base64(source.get("data"))
    )


def _attachments(node: Any) -> Iterator[Attachment]:
    if isinstance(node, list):
        for i, item in enumerate(node):
            if _is_base64_block(item):
                source = item["source"]
                yield node, i, source["data"], str(source.get("media_type") or "?"), True
            else:
                yield from _attachments(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("data", "base64") and _is_base64(value):
                media = node.get("media_type") or node.get("type") or "?"
                yield node, key, value, str(media), False
            else:
                yield from _attachments(value)


def record_attachments(data: Any) -> Iterator[Attachment]:
    """Yield the base64 attachments of a Claude Code record (message and UI copy).

    A block (``image``/``document`` with a base64 ``source``) is replaced whole by a text
    block when repaired, since the API refuses a block whose data is not base64; any
    other long base64 string under ``data`` or ``base64`` (the UI copy in
    ``toolUseResult``) is replaced by the hint text itself.
    """
    if not isinstance(data, dict):
        return
    for name in ("message", "toolUseResult"):
        if name in data:
            yield from _attachments(data[name])


def attachment_key(data: str) -> str:
    """Name an attachment by its content (sha256 of its base64 text)."""
    return hashlib.sha256(data.encode("ascii", "replace")).hexdigest()


def unparseable_payload(data: Any) -> bool:
    """True for a ``toolUseResult`` held as JSON text that no longer parses."""
    payload = data.get("toolUseResult") if isinstance(data, dict) else None
    if not isinstance(payload, str) or payload.lstrip()[:1] not in ("{", "["):
        return False
    try:
        orjson.loads(payload)
    except orjson.JSONDecodeError:
        return True
    return False


# -- the rules ----------------------------------------------------------------------------


def line_size(file: ClientFile, limits: Limits) -> list[Problem]:
    """Lines over the size limit (multi-megabyte tool outputs freeze ``claude --resume``)."""
    limit = limits.max_line_bytes
    return [
        Problem(
            rec.line,
            "oversized_line",
            f"line of {len(rec.raw):,} bytes exceeds {limit:,} (large lines stall a resume)",
        )
        for rec in file.records
        if len(rec.raw) > limit
    ]


_LINKS = (("parentUuid", "dangling_parent"), ("logicalParentUuid", "dangling_logical_parent"))


def parent_links(file: ClientFile, limits: Limits) -> list[Problem]:
    """``parentUuid``/``logicalParentUuid`` naming no record (or one the client skips)."""
    known: set[str] = set()
    unparsed: dict[str, int] = {}
    for rec in file.records:
        if isinstance(rec.data, dict) and isinstance(rec.data.get("uuid"), str):
            known.add(rec.data["uuid"])
        elif rec.invalid is not None:
            for m in UUID_RE.findall(bytes(rec.raw)):
                unparsed[m.decode("utf-8", "replace")] = rec.line
    problems: list[Problem] = []
    for line, data in file.objects():
        for field_name, kind in _LINKS:
            target = data.get(field_name)
            if field_name == "logicalParentUuid" and is_compact_boundary(data):
                # Only shown in the UI; a resume never follows it (real 2.1.x files
                # point it at records that were never written).
                continue
            if isinstance(target, str) and target not in known:
                why = (
                    f"line {unparsed[target]}, which the client cannot parse"
                    if target in unparsed
                    else "no record in the file"
                )
                problems.append(Problem(line, kind, f"{field_name} {target!r} names {why}"))
    return problems


def one_root(file: ClientFile, limits: Limits) -> list[Problem]:
    """One root per chain: a second ``parentUuid`` null cuts the conversation in two.

    A resume walks ``parentUuid`` up to a null; a compaction restart starts the chain
    anew and a subagent's sidechain has its own root, so neither counts.
    """
    roots: dict[Any, int] = {}
    problems: list[Problem] = []
    for line, data in file.objects():
        if (
            "parentUuid" not in data
            or data["parentUuid"] is not None
            or not isinstance(data.get("uuid"), str)
            or is_chain_restart(data)
        ):
            continue
        chain = (data.get("isSidechain") is True, data.get("agentId"))
        roots[chain] = roots.get(chain, 0) + 1
        if roots[chain] > 1:
            problems.append(
                Problem(
                    line,
                    "extra_root",
                    f"{data.get('type')} record {data['uuid']!r} has parentUuid null but "
                    "is neither the first record of its chain nor a compact_boundary",
                )
            )
    return problems


_ALWAYS = object()
"""A blank block the API receives empty whatever the other records of its response hold."""


@dataclass
class _ContentBlocks:
    """Empty text blocks and thinking without a signature: the API rejects both."""

    visible: set[Any] = field(default_factory=set)
    found: list[tuple[Problem, Any]] = field(default_factory=list)
    """Each problem, with the response whose other content would hide it (or _ALWAYS)."""

    def see(self, rec: Record) -> None:
        data, line = rec.data, rec.line
        if not is_message(data):
            return
        self.visible |= visible_groups((data,))
        content = data["message"].get("content")
        if isinstance(content, str) and not content.strip():
            self.found.append((Problem(line, "empty_text", "message text is empty"), _ALWAYS))
        for block in blocks_of(data):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and is_blank_text(block, data, _NOTHING_VISIBLE):
                text = block.get("text")
                unless = data["message"].get("id") if isinstance(text, str) and text else _ALWAYS
                problem = Problem(line, "empty_text", "empty text block (the API rejects it)")
                self.found.append((problem, unless))
            elif kind == "thinking" and not block.get("signature"):
                problem = Problem(line, "unsigned_thinking", "thinking block without a signature")
                self.found.append((problem, _ALWAYS))

    def problems(self, file: ClientFile) -> list[Problem]:
        return [p for p, unless in self.found if unless is _ALWAYS or unless not in self.visible]


_NOTHING_VISIBLE: frozenset[Any] = frozenset()


def content_blocks(file: ClientFile, limits: Limits) -> list[Problem]:
    """Empty text blocks and thinking without a signature: the API rejects both."""
    return _CONTENT_BLOCKS.check(file, limits)


@dataclass
class _DuplicatePayloads:
    """A ``toolUseResult`` payload (of some size) stored again by a later record."""

    seen: dict[tuple[bytes, int], int] = field(default_factory=dict)
    found: list[Problem] = field(default_factory=list)

    def see(self, rec: Record) -> None:
        if not isinstance(rec.data, dict):
            return
        key = payload_key(rec.data)
        if key is None:
            return
        if key in self.seen:
            message = f"toolUseResult of {key[1]:,} bytes repeats line {self.seen[key]}"
            self.found.append(Problem(rec.line, "duplicate_tool_use_result", message, warning=True))
        else:
            self.seen[key] = rec.line

    def problems(self, file: ClientFile) -> list[Problem]:
        return self.found


def duplicate_payloads(file: ClientFile, limits: Limits) -> list[Problem]:
    """A ``toolUseResult`` payload (of some size) stored again by a later record."""
    return _DUPLICATES.check(file, limits)


def resume_start(file: ClientFile, limits: Limits) -> list[Problem]:
    """The chain a resume rebuilds starting at an assistant turn (the API answers 400)."""
    datas = [rec.data for rec in file.records]
    chain = resume_chain(datas)
    first = next((k for k in chain if is_message(datas[k])), None)
    if first is None or datas[first]["type"] != "assistant":
        return []
    return [
        Problem(
            file.records[first].line,
            "chain_starts_with_assistant",
            "a resume rebuilds the conversation from here, an assistant turn "
            "(the API answers 400: first message must use the user role)",
        )
    ]


@dataclass
class _RepeatedAttachments:
    """A base64 image or PDF stored again by a later record (or twice in one)."""

    first: dict[str, int] = field(default_factory=dict)
    found: list[Problem] = field(default_factory=list)

    def see(self, rec: Record) -> None:
        if not isinstance(rec.data, dict):
            return
        repeats: list[tuple[str, int, int]] = []
        for _c, _k, text, media, _b in record_attachments(rec.data):
            key = attachment_key(text)
            if key in self.first:
                repeats.append((media, len(text), self.first[key]))
            else:
                self.first[key] = rec.line
        if repeats:
            media, size, at = repeats[0]
            copies = f"{len(repeats)} copies" if len(repeats) > 1 else "a copy"
            self.found.append(
                Problem(
                    rec.line,
                    "repeated_attachment",
                    f"{copies} of a base64 {media} attachment ({size:,} characters) first "
                    f"stored on line {at}; the client loads and sends every copy",
                )
            )

    def problems(self, file: ClientFile) -> list[Problem]:
        return self.found


def repeated_attachments(file: ClientFile, limits: Limits) -> list[Problem]:
    """A base64 image or PDF stored again by a later record (or twice in one)."""
    return _ATTACHMENTS.check(file, limits)


@dataclass
class _ToolUseResultJson:
    """A ``toolUseResult`` that is JSON text cut so it no longer parses."""

    found: list[Problem] = field(default_factory=list)

    def see(self, rec: Record) -> None:
        if isinstance(rec.data, dict) and unparseable_payload(rec.data):
            self.found.append(
                Problem(
                    rec.line,
                    "unparseable_tool_use_result",
                    "toolUseResult is JSON text that does not parse (the client's renderer "
                    "JSON.parses it on resume)",
                )
            )

    def problems(self, file: ClientFile) -> list[Problem]:
        return self.found


def tool_use_result_json(file: ClientFile, limits: Limits) -> list[Problem]:
    """A ``toolUseResult`` that is JSON text cut so it no longer parses."""
    return _TOOL_USE_RESULT_JSON.check(file, limits)


def codex_auto_compact_limit(window: int) -> int:
    """The saved context size at which Codex compacts a resumed rollout before its first turn.

    90% of the model's window; a ``token_count`` records 95% of it as
    ``model_context_window`` (272,000 -> 258,400), so the limit is 18/19 of that figure:
    Codex 0.169 compacts at 244,800 saved tokens of 258,400 and not at 244,799.
    """
    return window * 18 // 19


@dataclass(frozen=True)
class SavedContext:
    """The context size a Codex resume restores, and what the history it rebuilds holds."""

    index: int
    """The ``token_count`` record's index among the records."""
    tokens: int
    """Its ``info.last_token_usage.total_tokens``: the size Codex resumes with."""
    window: int
    """Its ``info.model_context_window``."""
    history: int
    """Codex's own estimate of the rebuilt history: its items' JSON bytes / 4."""

    @property
    def limit(self) -> int:
        """The saved size at which Codex compacts (:func:`codex_auto_compact_limit`)."""
        return codex_auto_compact_limit(self.window)


def _history_tokens(datas: Sequence[Any]) -> int:
    """Codex's estimate of what a resume rebuilds: the items after the last ``compacted``."""
    start = max(
        (i for i, d in enumerate(datas) if isinstance(d, dict) and d.get("type") == "compacted"),
        default=0,
    )
    size = sum(
        len(orjson.dumps(d.get("payload")))
        for d in datas[start:]
        if isinstance(d, dict) and d.get("type") in ("response_item", "compacted")
    )
    return -(-size // 4)


def stale_saved_context(datas: Sequence[Any]) -> SavedContext | None:
    """The ``token_count`` a Codex resume restores, if it compacts a history that fits.

    Codex seeds a resumed session with the ``info`` of the last ``token_count`` event
    that has one and compacts before the first turn when ``last_token_usage.total_tokens``
    reaches :func:`codex_auto_compact_limit`. That is reported here only when the history
    the rollout rebuilds is estimated under the limit: the saved figure is stale (or
    impossible, above the window), and a compaction would throw the history away for
    nothing. ``datas`` are the parsed records (None for a line that is not one).
    """
    for index in range(len(datas) - 1, -1, -1):
        data = datas[index]
        payload = data.get("payload") if isinstance(data, dict) else None
        if data is None or data.get("type") != "event_msg" or not isinstance(payload, dict):
            continue
        info = payload.get("info")
        if payload.get("type") != "token_count" or not isinstance(info, dict):
            continue
        last, window = info.get("last_token_usage"), info.get("model_context_window")
        tokens = last.get("total_tokens") if isinstance(last, dict) else None
        if not isinstance(tokens, int) or not isinstance(window, int) or window <= 0:
            return None
        if tokens < codex_auto_compact_limit(window):
            return None  # the common case: the history is not read again
        found = SavedContext(index, tokens, window, _history_tokens(datas))
        return found if found.limit > found.history else None
    return None


def codex_saved_context(file: ClientFile, limits: Limits) -> list[Problem]:
    """A saved context size that makes Codex compact, on resume, a history that fits."""
    found = stale_saved_context([rec.data for rec in file.records])
    if found is None:
        return []
    impossible = ", more than the model's whole window" if found.tokens > found.window else ""
    return [
        Problem(
            file.records[found.index].line,
            "codex_stale_token_count",
            f"the last token_count saves a context of {found.tokens:,} tokens{impossible} "
            f"(Codex compacts a resume at {found.limit:,}) but the history a resume "
            f"rebuilds holds about {found.history:,} tokens: Codex would compact it before the "
            "first turn",
        )
    ]


def codex_record_size(file: ClientFile, limits: Limits) -> list[Problem]:
    """A rollout record over 16 MiB, which Codex's state migration drops."""
    return [
        Problem(
            rec.line,
            "codex_record_over_16mib",
            f"record of {len(rec.raw):,} bytes is over 16 MiB (Codex's migration drops it)",
        )
        for rec in file.records
        if len(rec.raw) > CODEX_MAX_RECORD_BYTES
    ]


_SIZE = Rule.whole("line_size", "no line stalls a resume by its size", line_size)
_CONTENT_BLOCKS = Rule(
    "content_blocks", "no empty text block, no unsigned thinking", lambda _l: _ContentBlocks()
)
_DUPLICATES = Rule(
    "duplicate_payloads",
    "no toolUseResult stored twice (a warning)",
    lambda _l: _DuplicatePayloads(),
)
_ATTACHMENTS = Rule(
    "attachments", "no base64 image or PDF stored twice", lambda _l: _RepeatedAttachments()
)
_TOOL_USE_RESULT_JSON = Rule(
    "tool_use_result_json",
    "a toolUseResult held as JSON text parses",
    lambda _l: _ToolUseResultJson(),
)

CLIENT_RULES: dict[str, tuple[Rule, ...]] = {
    "claude_code": (
        Rule.whole(
            "parent_links", "every parentUuid names a record the client reads", parent_links
        ),
        Rule.whole(
            "one_root", "one root per chain (compactions and sidechains excepted)", one_root
        ),
        _CONTENT_BLOCKS,
        Rule.whole("resume_start", "a resume starts at a user turn", resume_start),
        _DUPLICATES,
        _ATTACHMENTS,
        _TOOL_USE_RESULT_JSON,
        _SIZE,
    ),
    "codex": (
        _SIZE,
        Rule.whole("record_size", "no record over 16 MiB (Codex drops it)", codex_record_size),
        Rule.whole(
            "saved_context",
            "the saved context size does not compact a history that fits",
            codex_saved_context,
        ),
    ),
}
"""The rules of each client's files, by the name of its format."""


def rules_for(file: ClientFile) -> tuple[Rule, ...]:
    """The transcript rules, then those of the client that wrote ``file`` (if any)."""
    extra = CLIENT_RULES.get(file.format_name or "", ()) if file.client else ()
    return TRANSCRIPT_RULES + extra
