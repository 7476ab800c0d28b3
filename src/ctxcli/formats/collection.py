"""Files that hold many trajectories: the interface and the shared JSONL-rows machinery.

A tau-bench results file is an array of runs, an OpenHands ``output.jsonl`` and most
training sets hold one trajectory per line. Each trajectory is reduced on its own
(budgets and "keep the last N" rules are per trajectory), so a :class:`Collection`
does not build one conversation: it splits the file into :class:`Part`s, each a
trajectory written as JSONL (one message or event per line, read by an ordinary
format), and joins the reduced parts back in the file's own layout. The whole file is
one restore unit: ``ctx restore`` rebuilds it from its original bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ctxcli.core.errors import Remedy, TranscriptError
from ctxcli.core.io import Input, Pages
from ctxcli.core.protocols import split_units
from ctxcli.formats.jsontext import dumps_like, loads_record
from ctxcli.formats.lines import BOM, Record, iter_records, join_parts, raise_first_invalid

__all__ = [
    "Collection",
    "ID_FIELDS",
    "JsonlRows",
    "Part",
    "Split",
    "first_value",
    "items_of",
    "part_bytes",
    "row_id_of",
]


@dataclass(frozen=True)
class Part:
    """One trajectory of a collection, as JSONL bytes.

    ``source`` is the bytes, or a function that makes them: a collection's parts are
    then made one at a time as they are reduced, and a large file never has all of
    them (nor all of its parsed trajectories) in memory at once. ``name`` is how errors
    cite it (``run.jsonl:3``), ``label`` where it is in the file (``line 3``, ``run 0``).
    """

    source: bytes | Callable[[], bytes]
    name: str
    label: str
    id: str | None = None
    """The trajectory's own id, when its row has one (``instance_id``, ``task_id``, ``id``)."""

    @property
    def raw(self) -> bytes:
        """The trajectory as JSONL (made again on every access when ``source`` makes it)."""
        return self.source if isinstance(self.source, bytes) else self.source()


@dataclass
class Split:
    """The trajectories of a file and how to put the reduced ones back.

    ``join`` gets one entry per part: its reduced JSONL bytes, or None when the
    part is unchanged, and returns the whole file.
    """

    format: str
    parts: list[Part]
    join: Callable[[list[bytes | None]], bytes]

    def pick(self, which: str, path: str) -> Part:
        """The trajectory ``which`` names: its number (1 for the first) or its id.

        Raises:
            TranscriptError: no trajectory, or several, answer to ``which``.
        """
        if which.isdigit() and 1 <= int(which) <= len(self.parts):
            return self.parts[int(which) - 1]
        found = [p for p in self.parts if p.id == which]
        if len(found) == 1:
            return found[0]
        ids = [p.id for p in self.parts if p.id is not None]
        known = f"; ids: {', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''}" if ids else ""
        why = f"{len(found)} trajectories have the id" if found else "no trajectory is"
        raise TranscriptError(
            path,
            None,
            f"{why} {which!r}: it holds {len(self.parts)} ({self.format}), numbered 1 to "
            f"{len(self.parts)}{known}",
        )


class Collection:
    """Base class of a file format holding several trajectories."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""

    def split(self, raw: Input, path: str) -> Split | None:
        """The trajectories in ``raw``, or None if ``raw`` is not this kind of file."""
        raise NotImplementedError


_NON_SPACE = re.compile(rb"\S")


def first_value(raw: Input) -> int:
    """Where the first JSON value of ``raw`` starts (after a BOM and blanks), or -1."""
    m = _NON_SPACE.search(raw, len(BOM) if raw[:3] == BOM else 0)
    return m.start() if m else -1


def part_bytes(items: Sequence[Any]) -> bytes:
    """A trajectory's messages or events as JSONL (one compact JSON value per line)."""
    return b"".join(dumps_like(item, b"") + b"\n" for item in items)


def items_of(reduced: bytes) -> list[Any]:
    """The messages or events of a reduced part."""
    return [loads_record(unit) for unit in split_units(reduced)]


def _is_item_list(value: Any, accept: Callable[[dict[str, Any]], bool]) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, dict) and accept(v) for v in value)
    )


class JsonlRows(Collection):
    """JSONL whose every line is one trajectory: an object with a list under ``column``.

    Subclasses say which column and which items they accept; unchanged lines keep
    their bytes, changed ones are written in their own JSON style.
    """

    columns: ClassVar[tuple[str, ...]] = ()

    def accept_item(self, item: dict[str, Any]) -> bool:
        """True if ``item`` is a message or event this collection reads."""
        raise NotImplementedError

    def accept_row(self, row: dict[str, Any], column: str) -> bool:
        """True if a line with a valid ``column`` is one of this collection's rows."""
        return True

    def column_of(self, row: Any) -> str | None:
        """The column of ``row`` holding its trajectory, or None."""
        if not isinstance(row, dict):
            return None
        for column in self.columns:
            if _is_item_list(row.get(column), self.accept_item) and self.accept_row(row, column):
                return column
        return None

    def split(self, raw: Input, path: str) -> Split | None:
        """Split a JSONL file of dataset rows into its trajectories (None: not one)."""
        # Only the first line is looked at before deciding: no copy of a large input.
        start = first_value(raw)
        if start < 0 or raw[start : start + 1] != b"{":
            return None
        end = raw.find(b"\n", start)
        try:
            first = loads_record(raw[start : end if end >= 0 else len(raw)])
        except (ValueError, RecursionError):
            return None
        if self.column_of(first) is None:
            return None
        records: list[Record] = []
        parts: list[Part] = []
        rows: list[tuple[Record, str]] = []
        for rec in iter_records(raw, path):
            records.append(rec)
            if rec.invalid is not None:
                raise_first_invalid([rec], path)
            if rec.data is None:
                continue
            column = self.column_of(rec.data)
            if column is None:
                raise TranscriptError(
                    path,
                    rec.line,
                    f"not a {self.name} row (expected an object with a list of "
                    f"{' or '.join(self.columns)})",
                    remedy=Remedy.CHECK_FORMAT,
                )
            # The parsed row is dropped: its part and, if the part changes, the row
            # around it are parsed again from the row's bytes when they are needed.
            row_id = row_id_of(rec.data)
            rec.data = None
            rows.append((rec, column))
            parts.append(
                Part(_row_part(rec, column), f"{path}:{rec.line}", f"line {rec.line}", row_id)
            )

        def join(outputs: list[bytes | None]) -> bytes:
            reduced = {
                id(rec): (column, out) for (rec, column), out in zip(rows, outputs, strict=True)
            }
            out: list[bytes | memoryview] = []
            pages = Pages(raw)  # the rows parsed again go back
            for rec in records:
                column, part = reduced.get(id(rec), ("", None))
                if part is None:
                    out.append(rec.raw)
                    continue
                pages.read(len(rec.raw))
                data = {**loads_record(rec.body), column: items_of(part)}
                lead = BOM if rec.has_bom else b""
                out.append(lead + dumps_like(data, rec.body) + rec.terminator)
            return join_parts(out)

        return Split(self.name, parts, join)


ID_FIELDS = ("instance_id", "task_id", "id")
"""Where a row of a collection keeps its trajectory's id (the first found is used)."""


def row_id_of(row: Any) -> str | None:
    """The id a collection's row gives its trajectory (see :data:`ID_FIELDS`), or None."""
    if isinstance(row, dict):
        for field in ID_FIELDS:
            value = row.get(field)
            if isinstance(value, str | int) and not isinstance(value, bool):
                return str(value)
    return None


def _row_part(rec: Record, column: str) -> Callable[[], bytes]:
    """A row's trajectory as JSONL, parsed again from the row's bytes on each call."""
    return lambda: part_bytes(loads_record(rec.body)[column])
