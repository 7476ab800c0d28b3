"""What ``--json`` prints, one shape for one file or many, and the share saved.

The bottom of the CLI's own layers with ``console``: ``render`` (the tables),
``messages`` (what is printed) and ``batch`` build on it; it loads no Rich.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxcli.api import batch

if TYPE_CHECKING:
    from ctxcli.pipeline.config import Config
    from ctxcli.pipeline.results import Report

__all__ = ["TOTALS", "json_payload", "restored_entry", "saved", "saved_pct", "single_payload"]


def saved_pct(before: int, after: int) -> str:
    """Return the share saved, as a percentage string."""
    if before <= 0:
        return "0.0%"
    return f"{100.0 * (before - after) / before:.1f}%"


def restored_entry(input: str, output: str, restored: Any) -> dict[str, Any]:
    """One file's entry of ``ctx restore --json``: where it went, its size, the reductions undone.

    ``restored`` is an :class:`~ctxcli.api.Restored`.
    """
    import hashlib
    from dataclasses import asdict

    return {
        "input": input,
        "output": output,
        "bytes": len(restored.data),
        "sha256": hashlib.sha256(restored.data).hexdigest(),
        "steps": [asdict(step) for step in restored.steps],
    }


def saved(before: int, after: int, word: str = "saved") -> str:
    """The change in words: ``62.5% saved`` (``word``), or ``grew by 1.6%`` when it grew."""
    if after > before > 0:
        return f"grew by {100.0 * (after - before) / before:.1f}%"
    return f"{saved_pct(before, after)} {word}"


TOTALS = ("tokens_before", "tokens_after", "bytes_before", "bytes_after")


def single_payload(report: Report, config: Config) -> dict[str, Any]:
    """Return :func:`json_payload` of a single-file run."""
    result = batch.FileResult(report.input, output=report.output, report=report)
    return json_payload([result], config)


def json_payload(results: Sequence[batch.FileResult], config: Config) -> dict[str, Any]:
    """Build the one JSON shape of ``ctx reduce/stats --json``, for one file or many.

    Totals at the top (``tokens_before`` ... ``bytes_after``, over the files that
    succeeded), ``files`` (one entry per input: its whole report), ``failed``,
    ``config`` (the configuration every file ran with: a path, a preset or
    ``defaults``) and ``fallbacks`` (each stage that fell back: input, stage, reason);
    the same keys for one file as for many, so a reader never asks how many there were.
    See ``docs/report.schema.json``.
    """
    files = [r.to_dict() for r in results]
    reports = [r.report for r in results if r.report is not None]
    payload: dict[str, Any] = {}
    for key in TOTALS:
        payload[key] = sum(int(getattr(rep, key)) for rep in reports)
    payload["files"] = files
    payload["failed"] = sum(1 for r in results if not r.ok)
    payload["config"] = config.source
    payload["fallbacks"] = [
        {"input": r.input, "stage": stage, "reason": reason}
        for r in results
        if r.report is not None
        for stage, reason in r.report.fallbacks
    ]
    return payload
