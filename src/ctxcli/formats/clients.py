"""One reader of the files agent clients write: every line, and which client wrote them.

``ctx doctor`` (its rules and repairs), ``ctx cost`` and ``ctx sessions`` read Claude
Code sessions and Codex rollouts through :func:`read_client_file`, the way the client
reads them: line by line, a line that is not a JSON object kept and named (the client
skips it), every other record parsed whole. ``ctx reduce`` and ``ctx validate`` read the
same lines through :func:`ctxcli.formats.load` (:func:`~ctxcli.formats.lines.iter_records`
splits and parses both), and the same sniffers say which format a file is: a client is
a format with :attr:`Format.client` set, so a third client is one format module here
(and the rules ``ctx doctor`` runs on its files, in ``sessions/client_rules.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxcli.core.errors import TranscriptError
from ctxcli.core.io import Input
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.formats import SNIFF_RECORDS, Document, Format, detect_format
from ctxcli.formats.lazy import share_strings
from ctxcli.formats.lines import Record, iter_records

__all__ = [
    "NOT_AN_OBJECT",
    "ClientFile",
    "Watch",
    "bare",
    "client_format",
    "read_client_file",
    "scan_client_file",
]

NOT_AN_OBJECT = "not a JSON object"
"""Why a line of a client's file that parses as another JSON value is kept unread."""


@dataclass
class ClientFile:
    """A transcript read line by line: its records, its format and its conversation.

    ``records`` holds every line (:class:`~ctxcli.formats.lines.Record`: its bytes, its
    parsed data or why it has none). ``format`` is the format its first records are of
    (None when no format reads them); :attr:`client` says whether a client wrote it.
    """

    path: str
    records: list[Record]
    format: Format | None
    conversation: Conversation = field(default_factory=lambda: Conversation(()))
    document: Document | None = None

    @classmethod
    def of(cls, doc: Document) -> ClientFile:
        """A loaded document, as the diagnose engine reads it."""
        return cls(doc.path, doc.records, doc.format, doc.conversation, doc)

    @property
    def client(self) -> str:
        """The client that wrote the file ("Claude Code", "Codex"), or "" for none."""
        return self.format.client if self.format is not None else ""

    @property
    def format_name(self) -> str | None:
        """The name of :attr:`format` (``claude_code``, ``codex``...), None for none."""
        return self.format.name if self.format is not None else None

    def line_of(self, message: Message) -> int | None:
        """The line a message was read from."""
        return self.records[message.key].line if message.key is not None else None

    def objects(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(line, record) of every line that is a JSON object, in file order."""
        for rec in self.records:
            if isinstance(rec.data, dict):
                yield rec.line, rec.data

    @property
    def malformed(self) -> int:
        """Lines that hold something but no JSON object (the client skips them)."""
        return sum(1 for rec in self.records if rec.invalid is not None)


def client_format(datas: Sequence[Any]) -> Format | None:
    """The format of a client's file these parsed records begin, or None.

    The formats' own sniffers decide (:func:`~ctxcli.formats.detect_format`), so a file
    ``ctx reduce`` reads as a Claude Code session is one for every reader.
    """
    fmt = _detect(datas, "<records>")
    return fmt if fmt is not None and fmt.client else None


def read_client_file(raw: Input, path: str = "<stdin>") -> ClientFile:
    """Read ``raw`` line by line; build its conversation if a format reads it.

    Nothing is an error here: an empty file has no records, a line that is not JSON
    (or, in a client's file, not an object) is a record with ``invalid`` set, and a
    file no format reads has no conversation. The texts are held whole, for readers of
    the records' data (the lazy texts of :func:`ctxcli.formats.load` are for reducing).
    """
    try:
        records = list(iter_records(raw, path))
    except TranscriptError:  # nothing but blanks: no line to read
        return ClientFile(path, [], None)
    fmt = _detect([r.data for r in records], path)
    if fmt is None:
        return ClientFile(path, records, None)
    if fmt.client:
        for rec in records:
            if rec.data is not None and not isinstance(rec.data, dict):
                rec.data, rec.invalid = None, NOT_AN_OBJECT
    doc = fmt.build(raw, path, records, whole_texts=True)
    return ClientFile(path, records, fmt, doc.conversation, doc)


Watch = Callable[[ClientFile], Callable[[Record], None]]
"""Given the file being read (its path and format known, no record yet), what to show
each record to while its data is whole."""


def scan_client_file(raw: Input, path: str, watch: Watch) -> ClientFile:
    """:func:`read_client_file`, each line parsed once and shown whole, then kept thin.

    Each record, parsed, goes to the function ``watch`` returns for the file (the rules
    of the diagnose engine, say), then its message is made (with no texts: its blocks'
    kinds, call ids and names) and its data cut to what the format's
    :meth:`~ctxcli.formats.format.Format.thin` keeps (ids, links, types). The parsed
    records of the whole file never exist at once. A format with no thin form (whose
    build reads all its records at once) keeps its records whole, as
    :func:`read_client_file` does. The file's conversation is that of
    :func:`read_client_file` but for the texts.
    """
    records = iter_records(raw, path)
    head: list[Record] = []
    try:
        for rec in records:
            head.append(rec)
            if sum(1 for r in head if r.data is not None) >= SNIFF_RECORDS:
                break
    except TranscriptError:  # nothing but blanks: no line to read
        file = ClientFile(path, [], None)
        watch(file)
        return file
    fmt = _detect([r.data for r in head], path)
    file = ClientFile(path, [], fmt)
    see = watch(file)
    thin = fmt is not None and fmt.client and fmt.thin({}) is not None
    seen: dict[str, str] = {}
    warnings: list[str] = []
    for rec in _chain(head, records):
        if fmt is not None and fmt.client and rec.data is not None:
            if not isinstance(rec.data, dict):
                rec.data, rec.invalid = None, NOT_AN_OBJECT
        see(rec)
        if thin:
            assert fmt is not None
            _thin(fmt, rec, len(file.records), path, seen, warnings)
        file.records.append(rec)
    if fmt is None:
        return file
    doc = (
        fmt.assemble(raw, path, file.records, warnings)
        if thin
        else fmt.build(raw, path, file.records, whole_texts=True)
    )
    file.conversation, file.document = doc.conversation, doc
    return file


def _chain(head: list[Record], rest: Iterator[Record]) -> Iterator[Record]:
    """``head``, handed over one by one (and let go), then ``rest``."""
    head.reverse()
    while head:
        yield head.pop()
    yield from rest


def _thin(
    fmt: Format, rec: Record, key: int, path: str, seen: dict[str, str], warnings: list[str]
) -> None:
    """Make ``rec``'s message as :meth:`Format.build` does, then keep it and its data thin."""
    if rec.invalid is not None:
        warnings.append(f"{path}:{rec.line}: {rec.invalid}; kept unchanged")
        return
    if rec.data is None or rec.kept:
        return
    message = fmt.to_message(rec.data, key, rec.line, path)
    rec.data = fmt.thin(rec.data)
    if type(rec.data) is dict:
        share_strings(rec.data, seen, fmt.unique_fields)
    rec.message = None if message is None else bare(message)


_BARE = {kind: Block(kind) for kind in Kind}


def bare(message: Message) -> Message:
    """``message`` without its texts: what the pairing rule reads (kinds, call ids, names).

    A block that is no call or result is one shared empty block of its kind.
    """
    return message.with_blocks(
        [
            Block(b.kind, "", b.call_id, b.name, b.is_error)
            if b.kind is Kind.TOOL_CALL or b.kind is Kind.TOOL_RESULT
            else _BARE[b.kind]
            for b in message.blocks
        ]
    )


def _detect(datas: Sequence[Any], path: str) -> Format | None:
    sample = [d for d in datas if d is not None][:SNIFF_RECORDS]
    if not sample:
        return None
    try:
        return detect_format(sample, path)
    except TranscriptError:
        return None
