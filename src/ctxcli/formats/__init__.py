"""Transcript formats: the registry, auto-detection and loading."""

from __future__ import annotations

from typing import Any

from ctxcli.core.errors import Remedy, TranscriptError
from ctxcli.formats.anthropic import Anthropic
from ctxcli.formats.base import (
    Document,
    Format,
    OutRecord,
    Record,
    State,
    parse_lines,
    raise_first_invalid,
)
from ctxcli.formats.claude_code import ClaudeCode
from ctxcli.formats.codex import Codex
from ctxcli.formats.json_doc import JsonDocument
from ctxcli.formats.langchain import LangChain
from ctxcli.formats.openai_chat import OpenAIChat

__all__ = [
    "Document",
    "Format",
    "OutRecord",
    "Record",
    "State",
    "detect_format",
    "get_format",
    "load",
    "FORMATS",
]

SNIFF_RECORDS = 20

# Order matters: more specific formats are tried first; openai_chat is the fallback
# for plain {role, content} lines.
FORMATS: dict[str, Format] = {}


def register_format(fmt: Format) -> Format:
    """Add a format to the registry (names are unique)."""
    if fmt.name in FORMATS:
        raise ValueError(f"format {fmt.name!r} is registered twice")
    FORMATS[fmt.name] = fmt
    return fmt


register_format(ClaudeCode())
register_format(Codex())
register_format(LangChain())
register_format(Anthropic())  # before openai_chat, whose sniff takes any {role} line
register_format(OpenAIChat())
register_format(JsonDocument())  # whole JSON documents, tried before JSONL parsing


def get_format(name: str) -> Format:
    """The format called ``name``."""
    try:
        return FORMATS[name]
    except KeyError:
        raise TranscriptError(
            "format", None, f"unknown format {name!r}; choose one of {', '.join(FORMATS)}"
        ) from None


def detect_format(records: list[Any], path: str) -> Format:
    """Pick the format whose sniffer accepts the first records."""
    sample = [r for r in records if r is not None][:SNIFF_RECORDS]
    for fmt in FORMATS.values():
        if fmt.units == "lines" and fmt.sniff(sample):
            return fmt
    raise TranscriptError(
        path,
        1,
        "unrecognised transcript format (known: " + ", ".join(FORMATS) + ")",
        remedy=Remedy.NAME_FORMAT,
    )


def load(
    raw: bytes, path: str = "<stdin>", *, format: str = "auto", on_invalid: str = "auto"
) -> Document:
    """Parse a transcript of any supported format.

    ``on_invalid`` says what a line that is not JSON does: ``"error"`` stops,
    ``"keep"`` passes it through unchanged with a warning naming file:line, and
    ``"auto"`` keeps it for formats whose own client skips such lines (Claude Code,
    Codex) and stops for the others.

    Raises:
        TranscriptError: the bytes are empty, not JSON, or not of the format.
    """
    if format != "auto":
        fmt = get_format(format)
        return fmt.load(raw, path, on_invalid=on_invalid)
    for fmt in FORMATS.values():
        if fmt.units == "document":
            loaded: Document | None = fmt.try_load_document(raw, path)  # type: ignore[attr-defined]
            if loaded is not None:
                return loaded
    records = parse_lines(raw, path, on_invalid="error" if on_invalid == "error" else "keep")
    try:
        fmt = detect_format([r.data for r in records if r.data is not None], path)
    except TranscriptError:
        raise_first_invalid(records, path)  # nothing parsed: say which line is broken
        raise
    if fmt.on_invalid(on_invalid) != "keep":
        raise_first_invalid(records, path)
    return fmt.build(raw, path, records)
