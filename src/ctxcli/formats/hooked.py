"""A Claude Code session written with ctx's hook: the tools' real outputs put back.

With ``ctx hooks`` installed, a long tool output reaches Claude Code as a preview (head,
the ctx hint citing the offloaded file, tail) in the tool's own output shape, and Claude
Code records that preview twice in the tool call's ``user`` record: in the record's
``toolUseResult`` (the output object) and, rendered as it sends it, in the message's
``tool_result``. :func:`put_back` rebuilds each such record as Claude Code writes it when
no hook ran: the original value in ``toolUseResult`` and the original's rendering in the
``tool_result``, every other byte of the line left as it was (:func:`dumps_like`).

How Claude Code renders an output in the ``tool_result`` is its own business; the
preview is found there in the forms 2.1.331 uses (checked against a session written
without the hook by the same script, ``tests/e2e/test_e2e_hooks.py``): as it is (Bash,
Grep, Glob, WebFetch, MCP text), or with its lines numbered from ``startLine`` (Read:
``N<TAB>line``). A preview found in neither form is an error, never a half-restored
record. What stays: the client's own records of the hook run (``hook_success``
attachments, which also hold the hook's answer) and of the requests as sent
(``api-request-blob``): they record what happened, and their hashes tie them together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from ctxcli.core.errors import RestoreError
from ctxcli.core.hints import truncated_path
from ctxcli.core.protocols import split_units
from ctxcli.formats.jsontext import dumps_like, loads_record

__all__ = ["Original", "has_hook_cuts", "put_back"]

At = tuple[str | int, ...]
Original = Callable[[str, str, At, bool], "str | None"]
"""``(cited file, preview, where, is a list of lines) -> the original text`` or None
(not the hook's): :func:`ctxcli.store.hook_notes.original_for`."""

_MARK = b"[ctx"


def has_hook_cuts(data: bytes) -> bool:
    """True if a tool call's record of ``data`` may hold a hook's preview (a cheap look)."""
    return _MARK in data and b'"toolUseResult"' in data


def put_back(data: bytes, original: Original, name: str = "input") -> tuple[bytes, int]:
    """``data`` with every hook preview replaced by the original; and how many were.

    Raises:
        RestoreError: a preview's original cannot be verified or read (``original``
            says why), or Claude Code's rendering of it is not found in the message.
    """
    out: list[bytes] = []
    count = 0
    for number, line in enumerate(split_units(data), 1):
        if _MARK not in line or b'"toolUseResult"' not in line:
            out.append(line)
            continue
        body = line.rstrip(b"\r\n")
        try:
            record = loads_record(body)
        except ValueError:
            out.append(line)  # not JSON: not a record Claude Code wrote, left as it is
            continue
        new, n = _record(record, original, f"{name}:{number}")
        if not n:
            out.append(line)
            continue
        out.append(dumps_like(new, body, record) + line[len(body) :])
        count += n
    return b"".join(out), count


def _texts(value: Any, at: At = ()) -> Iterator[tuple[At, str, bool]]:
    """Each string and list of lines in ``value``: ``(where, text, is lines)``."""
    if isinstance(value, str):
        yield at, value, False
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(item, (*at, key))
    elif isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            yield at, "\n".join(value), True
            return
        for i, item in enumerate(value):
            yield from _texts(item, (*at, i))


def _set(value: Any, at: At, new: Any) -> Any:
    """A copy of ``value`` with ``new`` at ``at``."""
    if not at:
        return new
    key, rest = at[0], at[1:]
    if isinstance(value, dict):
        return {**value, key: _set(value[key], rest, new)}
    copy = list(value)
    copy[key] = _set(copy[key], rest, new)  # type: ignore[index]
    return copy


def _record(record: Any, original: Original, where: str) -> tuple[Any, int]:
    if not isinstance(record, dict) or "toolUseResult" not in record:
        return record, 0
    result = record["toolUseResult"]
    message = record.get("message")
    done = 0
    for at, text, lines in list(_texts(result)):
        cited = truncated_path(text)
        if cited is None:
            continue
        full = original(cited, text, at, lines)
        if full is None:
            continue
        result = _set(result, at, full.split("\n") if lines else full)
        message = _message(message, text, full, _start_line(result), lines, where, cited)
        done += 1
    if not done:
        return record, 0
    return {**record, "toolUseResult": result, "message": message}, done


def _start_line(result: Any) -> int | None:
    file = result.get("file") if isinstance(result, dict) else None
    start = file.get("startLine") if isinstance(file, dict) else None
    return start if isinstance(start, int) and not isinstance(start, bool) else None


def _numbered(text: str, start: int) -> str:
    """Lines as Claude Code's Read shows them: ``N<TAB>line`` from ``start``."""
    return "\n".join(f"{n}\t{line}" for n, line in enumerate(text.split("\n"), start))


def _listed(inner: Any, preview: str, full: str) -> list[tuple[str, str]]:
    """The list and the count Claude Code puts under a cut list (Glob's ``filenames``).

    It counts the lines it was given: ``(Showing 59 of 120 matching files; 61 more are
    not listed...)`` under a preview of 59 lines, where the original's 100 say 100.
    """
    if not isinstance(inner, str):
        return []
    shown, kept = len(preview.split("\n")), len(full.split("\n"))
    pattern = re.escape(f"{preview}\n(Showing {shown} of ") + r"(\d+) matching files; (\d+) more"
    forms = []
    for m in re.finditer(pattern, inner):
        total = int(m.group(1))
        if int(m.group(2)) == total - shown:
            more = f"(Showing {kept} of {total} matching files; {total - kept} more"
            forms.append((m.group(0), f"{full}\n{more}"))
    return forms


def _message(
    message: Any,
    preview: str,
    full: str,
    start: int | None,
    lines: bool,
    where: str,
    cited: str,
) -> Any:
    """``message`` with the preview's rendering in its tool result replaced by the original's."""
    forms = [(preview, full)]
    if start is not None:
        forms.append((_numbered(preview, start), _numbered(full, start)))
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        for i, block in enumerate(content):
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            inner = block.get("content")
            extra = _listed(inner, preview, full) if lines else []
            changed = _swap(inner, [*extra, *forms])
            if changed is not None:
                new_content = [*content[:i], {**block, "content": changed}, *content[i + 1 :]]
                return {**message, "content": new_content}
    raise RestoreError(
        f"{where}: the tool result does not hold the preview of {cited} as Claude Code "
        "renders it, so the original cannot be put back in the message (nothing was restored)"
    )


def _swap(inner: Any, forms: list[tuple[str, str]]) -> Any:
    """``inner`` (a string or text blocks) with one rendering of the preview replaced."""
    if isinstance(inner, str):
        for old, new in forms:
            if inner.count(old) == 1:
                return inner.replace(old, new)
        return None
    if isinstance(inner, list):
        for j, part in enumerate(inner):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                text = _swap(part["text"], forms)
                if text is not None:
                    return [*inner[:j], {**part, "text": text}, *inner[j + 1 :]]
    return None
