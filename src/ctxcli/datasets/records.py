"""Deprecated: reduce parsed records in memory (:mod:`ctxcli.datasets.rows` does it).

:func:`reduce_records` was the function to map over a distributed job's partitions:
records in, records out, plus the removed texts as a plain dict. :func:`~ctxcli.datasets.rows.reduce_row`
does the same for a list of records (a row's cell), touching no file and reading no
``ctx.toml`` either, and also returns what :func:`~ctxcli.datasets.rows.restore_row`
needs to bring them back.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ctxcli.api import Report, reduce_bytes
from ctxcli.core.errors import TranscriptError
from ctxcli.core.protocols import encode_text, split_units
from ctxcli.formats.jsontext import dumps_like, loads_record
from ctxcli.pipeline.config import Config, build_config, default_config
from ctxcli.pipeline.options import RunOptions
from ctxcli.services.tokens.ledger import CountOptions
from ctxcli.store.memory import BlobStore

__all__ = ["ReducedRecords", "reduce_records"]


@dataclass(frozen=True)
class ReducedRecords:
    """What :func:`reduce_records` returns.

    Attributes:
        records: the output records in order: unchanged ones equal to their input,
            changed ones rewritten, dropped ones absent.
        offload: every removed text by its path relative to ``offload_dir``;
            write ``offload_dir / path`` for each entry so the agent can read them back.
        offload_dir: the directory the hints in ``records`` cite.
        report: token and byte counts per stage (bytes of the records as JSON lines).
    """

    records: list[Any]
    offload: dict[str, str]
    offload_dir: str
    report: Report

    def offload_bytes(self) -> dict[str, bytes]:
        """The offloaded texts encoded exactly as ``ctx reduce`` writes them."""
        return {path: encode_text(text) for path, text in self.offload.items()}


def reduce_records(
    records: Iterable[Any],
    *,
    config: Config | Mapping[str, Any] | None = None,
    offload_dir: str = "ctx-offload",
    format: str | None = None,
    name: str = "<records>",
) -> ReducedRecords:
    """Deprecated: reduce a transcript given as parsed JSON records.

    :func:`~ctxcli.datasets.rows.reduce_row` does it (a list of records is a row's
    cell; a transcript that is one JSON document is its dict), and gives what
    :func:`~ctxcli.datasets.rows.restore_row` needs to bring the records back.

    Args:
        records: the transcript's records, e.g. ``[json.loads(line) for line in f]``;
            a transcript that is one JSON document (SWE-agent) is ``[json.load(f)]``.
        config: a :class:`Config` (see :func:`~ctxcli.load_config`), a mapping shaped
            like ``ctx.toml`` (``{"stages": [{"use": "truncate_tool_output"}]}``), or
            None for the built-in defaults. Never looked up on disk.
        offload_dir: the directory the hints cite; nothing is written there.
        format: force a format instead of auto-detecting it.
        name: how error messages name this transcript.

    Raises:
        TranscriptError: no records, or records that are no supported format.
        ConfigError: the mapping is not a valid configuration.

    Example::

        >>> from ctxcli import reduce_row
        >>> out = reduce_row([{"role": "user", "content": "hi"}])
        >>> out.value, out.blobs
        ([{'role': 'user', 'content': 'hi'}], {})
    """
    warnings.warn(
        "ctxcli.reduce_records is deprecated and will be removed; use ctxcli.reduce_row "
        "(a list of records is a row's cell; restore_row brings it back)",
        DeprecationWarning,
        stacklevel=2,
    )
    if config is None:
        config = default_config()
    elif not isinstance(config, Config):
        config = build_config(dict(config), "config")
    if format is not None:
        config = config.with_overrides(format=format)
    # One JSON line per record: the formats, the pipeline and the stats then run
    # exactly as for a file, so a record reduces the same in both APIs.
    raw = b"".join(dumps_like(record, b"") + b"\n" for record in records)
    if not raw:
        raise TranscriptError(name, None, "no records; there is nothing to reduce")
    # Texts are cited by the names the disk store gives them: the records are those
    # `ctx reduce` writes.
    offload = BlobStore(offload_dir, cite="name")
    # No disk cache of token counts and no process pool: a map function runs inside a
    # job that owns the workers and the disks.
    options = RunOptions(counting=CountOptions(cache=False, workers=1))
    reduced = reduce_bytes(raw, config=config, offload=offload, path=name, options=options)
    if reduced.units == "lines":
        out = [loads_record(unit) for unit in split_units(reduced.output)]
    else:
        out = [loads_record(reduced.output)]
    return ReducedRecords(out, offload.texts(), offload.root, reduced.report)
