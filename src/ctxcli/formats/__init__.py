"""Transcript formats: the registry, auto-detection and loading.

Formats register like stages (one design, :mod:`ctxcli.core.plugins`): each built-in
module decorates its class with :func:`register_format`, and so does a plugin module
named by a ``ctxcli.formats.v1`` entry point. Auto-detection tries the built-ins in
the order of ``BUILTIN_MODULES``, then plugins; any format can be chosen by name.
A format plugin imports what it needs from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from ctxcli.core.errors import DEFAULT_ON_INVALID, OnInvalid, Remedy, TranscriptError
from ctxcli.core.io import Input
from ctxcli.core.model import Block, Kind, Message
from ctxcli.formats.format import Document, Format, OutRecord, State
from ctxcli.formats.lines import BOM, Record, iter_records, raise_first_invalid
from ctxcli.formats.registry import BUILTIN_MODULES, FORMAT_REGISTRY, PLUGIN_GROUP, register_format

__all__ = [
    "BUILTIN_MODULES",
    "Block",
    "Document",
    "Format",
    "Kind",
    "Message",
    "OutRecord",
    "PLUGIN_GROUP",
    "Record",
    "State",
    "TranscriptError",
    "detect_format",
    "get_format",
    "load",
    "register_format",
    "registry",
    "split_collection",
    "COLLECTIONS",
    "Collection",
    "Split",
    "FORMATS",
    "format_names",
]

SNIFF_RECORDS = 20

# Every run needs the formats, so the built-ins load with this package (plugins join
# on the first registry() call).
FORMAT_REGISTRY.load_builtins()
FORMATS: dict[str, Format] = FORMAT_REGISTRY.loaded
"""The registered formats, in auto-detection order (plugins once :func:`registry` ran)."""


# Files holding many trajectories, each reduced on its own (see formats/collection.py);
# tried after the documents and before the JSONL formats. They are not formats of their
# own: each part is read by an ordinary format.
from ctxcli.formats.collection import Collection, Split  # noqa: E402
from ctxcli.formats.dataset_rows import MessageRows  # noqa: E402
from ctxcli.formats.json_doc import is_jsonl  # noqa: E402
from ctxcli.formats.openhands import OpenHandsOutput  # noqa: E402
from ctxcli.formats.taubench import TauBenchRuns  # noqa: E402

COLLECTIONS: dict[str, Collection] = {
    c.name: c for c in (TauBenchRuns(), OpenHandsOutput(), MessageRows())
}


def split_collection(raw: Input, path: str = "<stdin>", *, format: str = "auto") -> Split | None:
    """The trajectories of a file holding many, or None for a single transcript.

    Raises:
        TranscriptError: ``format`` names a collection and ``raw`` is not one.
    """
    if format != "auto":
        if format not in COLLECTIONS:
            return None
        split = COLLECTIONS[format].split(raw, path)
        if split is None:
            raise TranscriptError(
                path,
                None,
                f"not a {format} file ({COLLECTIONS[format].description})",
                remedy=Remedy.CHECK_FORMAT,
            )
        return split
    for collection in COLLECTIONS.values():
        split = collection.split(raw, path)
        if split is None:
            continue
        # One row may also be a whole document (a compact mini-swe-agent trajectory):
        # its document format knows it better.
        if len(split.parts) == 1 and any(
            fmt.units == "document" and fmt.try_load_document(raw[:], path) is not None  # type: ignore[attr-defined]
            for fmt in FORMATS.values()
        ):
            return None
        return split
    return None


def registry() -> dict[str, Format]:
    """All formats by name: built-ins first, then entry-point plugins (loaded on first use)."""
    return FORMAT_REGISTRY.items()


def format_names(formats: Iterable[str] | None = None) -> list[str]:
    """Every name ``--format`` takes: the formats (``formats``, else all), then the collections.

    The one list the help and the error for an unknown name both show.
    """
    return [*(registry() if formats is None else formats), *COLLECTIONS]


def get_format(name: str) -> Format:
    """The format called ``name``."""
    formats = registry()
    try:
        return formats[name]
    except KeyError:
        names = ", ".join(format_names(formats))
        raise TranscriptError(
            "format", None, f"unknown format {name!r}; choose one of {names}"
        ) from None


def detect_format(records: list[Any], path: str) -> Format:
    """Pick the format whose sniffer accepts the first records."""
    sample = [r for r in records if r is not None][:SNIFF_RECORDS]
    formats = registry()
    for fmt in formats.values():
        if fmt.units == "lines" and fmt.sniff(sample):
            return fmt
    raise TranscriptError(
        path,
        1,
        "unrecognised transcript format (known: " + ", ".join(formats) + ")",
        remedy=Remedy.NAME_FORMAT,
    )


def load(
    raw: Input,
    path: str = "<stdin>",
    *,
    format: str = "auto",
    on_invalid: OnInvalid = DEFAULT_ON_INVALID,
) -> Document:
    """Parse a transcript of any supported format.

    ``on_invalid`` says what a line that is not JSON does: ``"error"`` stops,
    ``"keep"`` passes it through unchanged with a warning naming file:line, and
    ``"auto"`` keeps it for formats whose own client skips such lines (Claude Code,
    Codex) and stops for the others.

    Raises:
        TranscriptError: the bytes are empty, not JSON, or not of the format.
        ConfigError: ``on_invalid`` is none of :class:`~ctxcli.core.errors.OnInvalid`.
    """
    on_invalid = OnInvalid.of(on_invalid)
    if format != "auto":
        fmt = get_format(format)
        # A whole document is parsed whole: a map of it saves nothing (``raw[:]`` of
        # bytes is the same object, of a map a copy).
        return fmt.load(raw if fmt.units == "lines" else raw[:], path, on_invalid=on_invalid)
    if isinstance(raw, bytes) or not is_jsonl(raw):
        for fmt in registry().values():
            if fmt.units == "document":
                loaded: Document | None = fmt.try_load_document(raw[:], path)  # type: ignore[attr-defined]
                if loaded is not None:
                    return loaded
    # The first records tell the format; a format that leaves long texts in the input
    # builds its messages as the rest is parsed (Format.build_as_parsed).
    rest = iter_records(raw, path)
    head: list[Record] = []
    sample: list[Any] = []
    for rec in rest:
        head.append(rec)
        if rec.invalid is not None and on_invalid is OnInvalid.ERROR:
            _refuse_other_document(raw, path, head)
            raise_first_invalid([rec], path)
        if rec.data is not None:
            sample.append(rec.data)
            if len(sample) == SNIFF_RECORDS:
                break
    try:
        fmt = detect_format(sample, path)
    except TranscriptError:
        invalid = [rec for rec in head if rec.invalid is not None]
        _refuse_other_document(raw, path, head)
        if not sample and invalid:
            # No line is JSON (a binary file, plain text): keeping such lines would not
            # make it a transcript, so say what it is rather than how to keep them.
            raise TranscriptError(
                path,
                invalid[0].line,
                f"not a transcript: none of its {len(invalid):,} lines is JSON "
                f"({invalid[0].invalid}); pass a JSONL or JSON transcript",
            ) from None
        raise_first_invalid(head + list(rest), path)  # nothing parsed: say which line is broken
        raise
    if fmt.lazy_texts:
        return fmt.build_as_parsed(raw, path, head, rest, on_invalid)
    records = head + list(rest)
    if fmt.on_invalid(on_invalid) is not OnInvalid.KEEP:
        raise_first_invalid(records, path)
    return fmt.build(raw, path, records)


def _refuse_other_document(raw: Input, path: str, head: list[Record]) -> None:
    """Say so when ``raw`` is one JSON document that no format reads.

    Its first line (``head`` holds it) is then no JSON value of its own (a pretty-printed document: Cline's
    ``ui_messages.json``, say), and "fix the line or keep it" would send the user after
    a line that is fine. Checked only on that error path; orjson alone, so a large
    file that is no JSON at all fails fast.

    Raises:
        TranscriptError: ``raw`` is such a document.
    """
    first = next((r for r in head if r.data is not None or r.invalid is not None), None)
    if first is None or first.invalid is None:
        return
    try:
        value = orjson.loads(raw[3:] if raw[:3] == BOM else raw[:])
    except orjson.JSONDecodeError:
        return
    if isinstance(value, dict):
        keys = ", ".join(repr(k) for k in list(value)[:5]) + (", ..." if len(value) > 5 else "")
        what = f"a JSON object (keys: {keys})" if value else "an empty JSON object"
    elif isinstance(value, list):
        what = f"a JSON array of {len(value):,} item{'s' * (len(value) != 1)}"
    else:
        return
    names = ", ".join([*registry(), *COLLECTIONS])
    raise TranscriptError(
        path,
        None,
        f"not a transcript format ctx reads: {what}, which none of its formats takes "
        f"(it reads: {names})",
    )
