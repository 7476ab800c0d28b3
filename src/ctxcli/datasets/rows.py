"""Reduce trajectories as they sit in dataset rows: in memory, blobs content-addressed.

A dataset (Parquet, JSONL, a Hugging Face or Ray dataset) holds one trajectory per row,
in one column. :func:`reduce_row` takes that cell as it is:

- ``str`` or ``bytes``: a transcript's text (JSONL, or one JSON document such as a
  SWE-agent ``.traj``); the reduced cell is text of the same type, and restoring it
  gives the original bytes;
- a ``list`` of message dicts (a ``messages`` column);
- a ``dict``: a whole trajectory object of a known format (SWE-agent, mini-swe-agent,
  a tau-bench run, an OpenHands instance).

It returns the reduced cell, its stats, and its blobs: every removed text and every
original unit ``restore_row`` needs, keyed by their SHA-256 (the same text in a
thousand rows is one blob). Nothing touches a file: the caller (a Ray actor, a
``datasets.map`` function, a Spark UDF) stores the blobs where it keeps them, under
``<offload_root>/<sha[:2]>/<sha>``, the paths the hints in the reduced rows cite.

A :class:`RowReducer` holds a picklable configuration and loads the tokenizer once when
it is built, so a worker builds one and calls it for every row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctxcli.api.remote import BlobReader
from ctxcli.core.errors import (
    DEFAULT_ON_INVALID,
    CtxError,
    OnInvalid,
    RestoreError,
    TranscriptError,
)
from ctxcli.core.protocols import encode_text, sha256, split_units
from ctxcli.formats.jsontext import dumps_like, loads_record
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import Config, build_config, default_config
from ctxcli.pipeline.options import RunOptions
from ctxcli.services.tokens.engines import load_engine
from ctxcli.services.tokens.ledger import CountOptions
from ctxcli.store.memory import BlobStore, blob_path

__all__ = [
    "RESTORE_VERSION",
    "STAT_COLUMNS",
    "BlobStore",
    "ReducedRow",
    "RowReducer",
    "blob_path",
    "columns_of",
    "fetch_blob",
    "reduce_row",
    "restore_row",
]

RESTORE_VERSION = 1
STAT_COLUMNS = (
    "ctx_format",
    "ctx_tokens_before",
    "ctx_tokens_after",
    "ctx_bytes_before",
    "ctx_bytes_after",
    "ctx_restore",
    "ctx_error",
)
"""The columns :mod:`ctxcli.datasets` integrations add to a reduced dataset."""


@dataclass(frozen=True)
class ReducedRow:
    """What :func:`reduce_row` returns.

    Attributes:
        value: the reduced cell, of the input's type (``str``, ``bytes``, list, dict).
        stats: ``format``, ``messages``, ``tokens_before``/``_after``,
            ``bytes_before``/``_after`` (of the cell as JSON text), ``offloaded``.
        blobs: SHA-256 -> bytes of every removed text and original unit.
        restore: what :func:`restore_row` needs besides the blobs (a JSON string: it
            goes into a dataset column as it is).
    """

    value: Any
    stats: dict[str, Any]
    blobs: dict[str, bytes] = field(repr=False)
    restore: str


def _encode(value: Any, name: str) -> tuple[str, bytes]:
    """The cell's kind and the transcript bytes ctx reduces for it."""
    if isinstance(value, bytes | bytearray | memoryview):
        return "bytes", bytes(value)
    if isinstance(value, str):
        return "str", encode_text(value)
    if isinstance(value, list | tuple):
        if not value:
            raise TranscriptError(name, None, "no messages; there is nothing to reduce")
        # One message per line, exactly as reduce_records writes records.
        return "messages", b"".join(dumps_like(m, b"") + b"\n" for m in value)
    if isinstance(value, dict):
        return "object", dumps_like(value, b"")
    raise TranscriptError(
        name,
        None,
        f"a {type(value).__name__} is not a trajectory; pass its text, a list of message "
        "dicts or a trajectory object",
    )


def _decode(kind: str, data: bytes, units: str) -> Any:
    if kind == "bytes":
        return data
    if kind == "str":
        return data.decode("utf-8", "surrogatepass")
    if kind == "messages":
        return [loads_record(unit) for unit in split_units(data)]
    return loads_record(data)


def _coerce_config(config: Config | Mapping[str, Any] | None) -> Config:
    if config is None:
        return default_config()
    if isinstance(config, Config):
        return config
    return build_config(dict(config), "config")


class RowReducer:
    """Reduces rows with one configuration; build one per worker, call it per row.

    Args:
        config: a :class:`Config`, a mapping shaped like ``ctx.toml``, or None for
            the built-in defaults (never looked up on disk).
        offload_root: where the blobs will be stored; the hints cite paths under it.
        on_invalid: what a line that is not JSON does (the default is ``ctx reduce``'s,
            :data:`~ctxcli.core.errors.DEFAULT_ON_INVALID`).

    The instance pickles (only the configuration travels); building it loads the
    tokenizer, which the process then keeps for every later row.
    """

    def __init__(
        self,
        config: Config | Mapping[str, Any] | None = None,
        offload_root: str = "ctx-offload",
        *,
        on_invalid: OnInvalid = DEFAULT_ON_INVALID,
    ) -> None:
        self.config = _coerce_config(config)
        self.offload_root = offload_root
        self.on_invalid = on_invalid
        self._warm()

    def _warm(self) -> None:
        tokenizer = self.config.settings.tokenizer
        if tokenizer not in ("anthropic", "approx"):
            load_engine(tokenizer, None)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "offload_root": self.offload_root,
            "on_invalid": self.on_invalid,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._warm()

    def __call__(self, value: Any, *, name: str = "<row>") -> ReducedRow:
        """Reduce one cell (see :func:`reduce_row`)."""
        kind, raw = _encode(value, name)
        store = BlobStore(self.offload_root)
        # No disk cache and no process pool: the job that maps rows owns the workers.
        reduced = reduce_bytes(
            raw,
            config=self.config,
            offload=store,
            path=name,
            options=RunOptions(
                self.on_invalid, counting=CountOptions(cache=False, workers=1), monitors=False
            ),
        )
        report = reduced.report
        out_value = value if reduced.output == raw else _decode(kind, reduced.output, reduced.units)
        restore = {
            "v": RESTORE_VERSION,
            "kind": kind,
            "units": reduced.units,
            "script": reduced.script,
            "input": sha256(raw),
            # Lists and dicts are checked by their canonical JSON (what _encode makes of
            # them on restore), not by ctx's output bytes: a dataset keeps the value.
            "output": sha256(
                reduced.output if kind in ("str", "bytes") else _encode(out_value, name)[1]
            ),
        }
        stats = {
            "format": report.format,
            "messages": report.messages,
            "tokens_before": report.tokens_before,
            "tokens_after": report.tokens_after,
            "bytes_before": report.bytes_before,
            "bytes_after": report.bytes_after,
            "offloaded": store.count,
        }
        return ReducedRow(out_value, stats, store.blobs, orjson.dumps(restore).decode())

    def many(
        self, values: Iterable[Any], *, on_error: str = "raise"
    ) -> list[ReducedRow | CtxError]:
        """Reduce several cells; with ``on_error="keep"`` a bad cell gives its error."""
        out: list[ReducedRow | CtxError] = []
        for i, value in enumerate(values):
            try:
                out.append(self(value, name=f"<row {i}>"))
            except CtxError as exc:
                if on_error != "keep":
                    raise
                out.append(exc)
        return out


def reduce_row(
    value: Any,
    config: Config | Mapping[str, Any] | None = None,
    *,
    offload_root: str = "ctx-offload",
    name: str = "<row>",
) -> ReducedRow:
    """Reduce one trajectory as it sits in a dataset row.

    For many rows build a :class:`RowReducer` once and call it per row.

    Raises:
        TranscriptError: the cell is empty or no supported format.

    Example::

        >>> from ctxcli.datasets.rows import reduce_row
        >>> out = reduce_row([{"role": "user", "content": "hi"}])
        >>> out.value, out.stats["tokens_before"] == out.stats["tokens_after"]
        ([{'role': 'user', 'content': 'hi'}], True)
    """
    return RowReducer(config, offload_root)(value, name=name)


_DIGEST = re.compile(r"[0-9a-f]{64}")
_KINDS = ("str", "bytes", "messages", "object")
_UNITS = ("lines", "document")


@dataclass(frozen=True)
class _Restore:
    """A validated ``ctx_restore`` value: every op well formed, every digest a SHA-256."""

    kind: str
    units: str
    script: list[tuple[str, int, str]]
    """``("c" | "s", count, "")`` or ``("b", length, digest)``."""
    input: str
    output: str


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _op(op: Any) -> tuple[str, int, str]:
    """One op of a row's script, or ValueError saying what is wrong with it."""
    if isinstance(op, list) and len(op) == 2 and op[0] in ("c", "s") and _is_count(op[1]):
        return op[0], op[1], ""
    if (
        isinstance(op, list)
        and len(op) == 4
        and op[0] == "b"
        and _is_count(op[1])
        and _is_count(op[2])
        and isinstance(op[3], str)
        and _DIGEST.fullmatch(op[3])
    ):
        return "b", op[2], op[3]
    raise ValueError(f"op {str(op)[:80]} is not ['c'|'s', n] nor ['b', offset, length, sha256]")


def _parse_restore(restore: Any) -> _Restore:
    """The restore value's fields, checked; ValueError names the first bad one."""
    try:
        info = orjson.loads(restore)
    except (orjson.JSONDecodeError, TypeError):
        raise ValueError("not JSON text") from None
    if not isinstance(info, dict):
        raise ValueError("not a JSON object")
    if info.get("v") != RESTORE_VERSION or type(info.get("v")) is not int:
        raise ValueError(f"version {str(info.get('v'))[:20]} is not {RESTORE_VERSION}")
    for key, allowed in (("kind", _KINDS), ("units", _UNITS)):
        if info.get(key) not in allowed:
            raise ValueError(f"{key} {str(info.get(key))[:20]} is not one of {', '.join(allowed)}")
    for key in ("input", "output"):
        if not (isinstance(info.get(key), str) and _DIGEST.fullmatch(info[key])):
            raise ValueError(f"{key} is not a SHA-256")
    if not isinstance(info.get("script"), list):
        raise ValueError("script is not a list of ops")
    script = [_op(op) for op in info["script"]]
    return _Restore(info["kind"], info["units"], script, info["input"], info["output"])


def _fetcher(
    blobs: Mapping[str, bytes] | Callable[[str], bytes] | BlobReader,
) -> Callable[[str, int], bytes]:
    """A function that gets a blob of a declared length (a store's read is capped)."""
    if isinstance(blobs, BlobReader):
        return blobs.read
    if callable(blobs):
        fetch = blobs
        return lambda digest, _length: fetch(digest)
    return lambda digest, _length: blobs[digest]


def restore_row(
    value: Any,
    restore: str,
    blobs: Mapping[str, bytes] | Callable[[str], bytes],
    *,
    name: str = "<row>",
) -> Any:
    """The original cell, from a reduced one, its ``restore`` string and its blobs.

    ``blobs`` maps a SHA-256 to bytes, or is a function that fetches one (from an
    offload directory or a bucket; a :class:`~ctxcli.api.remote.BlobReader` reads no
    more of a blob than its declared length). The restore string is checked first
    (it comes from the dataset, like the cell): only known ops, counts, and SHA-256
    digests, so no blob is looked up outside the store. Every blob and the result
    are checked against their hashes.

    Raises:
        RestoreError: the restore string is malformed, a blob is missing or altered,
            or ``value`` is not the reduced cell the restore string belongs to.
    """
    try:
        info = _parse_restore(restore)
    except ValueError as exc:
        raise RestoreError(
            f"{name}: the ctx_restore value is not one ctx wrote ({exc}); it cannot be used."
        ) from None
    data = _cell_bytes(value, info.kind, name)
    if sha256(data) != info.output:
        raise RestoreError(
            f"{name}: the reduced row was changed after ctx reduced it (its sha256 does not "
            "match); restore it from the dataset ctx wrote."
        )
    original = _replay(data, info, _fetcher(blobs), name)
    if sha256(original) != info.input:
        raise RestoreError(f"{name}: the rebuilt row does not match the original's sha256.")
    return _decode(info.kind, original, info.units)


def _cell_bytes(value: Any, kind: str, name: str) -> bytes:
    """The bytes the reduced cell was hashed as; a cell of another kind cannot be it."""
    expected = {"str": str, "bytes": bytes | bytearray | memoryview, "messages": list | tuple}
    if not isinstance(value, expected.get(kind, dict)):
        raise RestoreError(
            f"{name}: the cell is a {type(value).__name__}, not the {kind} ctx wrote."
        )
    try:
        return _encode(value, name)[1]
    except CtxError as exc:
        raise RestoreError(str(exc)) from None


def _replay(data: bytes, info: _Restore, fetch: Callable[[str, int], bytes], name: str) -> bytes:
    """Run the script over the reduced cell's units: the original's bytes."""
    pieces = split_units(data) if info.units == "lines" else [data]
    out = bytearray()
    pos = 0
    for op, n, digest in info.script:
        if op == "c":
            out += b"".join(pieces[pos : pos + n])
            pos += n
        elif op == "s":
            pos += n
        else:
            out += _checked(fetch, digest, n, name)
    return bytes(out)


def _checked(fetch: Callable[[str, int], bytes], digest: str, length: int, name: str) -> bytes:
    try:
        piece = fetch(digest, length)
    except (KeyError, OSError):
        raise RestoreError(
            f"{name}: blob {digest[:12]}… is missing from the offload store."
        ) from None
    if len(piece) != length or sha256(piece) != digest:
        raise RestoreError(f"{name}: blob {digest[:12]}… was altered (sha256 mismatch).")
    return piece


def fetch_blob(
    blobs: Mapping[str, bytes] | Callable[[str], bytes],
    digest: str,
    length: int,
    *,
    name: str = "<row>",
) -> bytes:
    """The blob ``digest`` of ``length`` bytes, checked as :func:`restore_row` checks its own.

    Raises:
        RestoreError: the digest is no SHA-256, or the blob is missing or altered.
    """
    if not _DIGEST.fullmatch(digest) or length < 0:
        raise RestoreError(f"{name}: {digest[:70]!r} names no blob ctx wrote.")
    return _checked(_fetcher(blobs), digest, length, name)


def columns_of(
    values: list[Any], results: list[ReducedRow | CtxError]
) -> tuple[list[Any], dict[str, list[Any]], dict[str, bytes]]:
    """What a dataset batch becomes: the new cells, the stats columns, every blob.

    A cell that failed keeps its value, with its error in ``ctx_error``.
    """
    cells: list[Any] = []
    columns: dict[str, list[Any]] = {name: [] for name in STAT_COLUMNS}
    blobs: dict[str, bytes] = {}
    for value, r in zip(values, results, strict=True):
        ok = isinstance(r, ReducedRow)
        stats = r.stats if isinstance(r, ReducedRow) else {}
        if isinstance(r, ReducedRow):
            blobs.update(r.blobs)
        cells.append(r.value if isinstance(r, ReducedRow) else value)
        columns["ctx_format"].append(stats.get("format"))
        for key in ("tokens_before", "tokens_after", "bytes_before", "bytes_after"):
            columns[f"ctx_{key}"].append(stats.get(key))
        columns["ctx_restore"].append(r.restore if isinstance(r, ReducedRow) else None)
        columns["ctx_error"].append(None if ok else str(r))
    return cells, columns, blobs
