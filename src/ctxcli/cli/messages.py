"""What reduce, stats and restore print: one payload on stdout, the rest on stderr."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import orjson

from ctxcli import api
from ctxcli.cli import console
from ctxcli.cli.console import shown_path
from ctxcli.cli.payload import saved, single_payload

if TYPE_CHECKING:
    from ctxcli.pipeline.config import Config
    from ctxcli.report import ReportData

__all__ = [
    "print_reduction",
    "print_restored",
    "print_stats",
    "warn_all",
]


def warn_all(warnings: list[str]) -> None:
    """Print each warning on stderr."""
    for w in warnings:
        console.warn(w)


def _file(payload: dict[str, Any]) -> dict[str, Any]:
    """The one file's entry of a one-file JSON payload (what is said of that file goes there)."""
    files: list[dict[str, Any]] = payload["files"]
    return files[0]


def print_reduction(done: api.Reduction, config: Config, *, json: bool, quiet: bool) -> None:
    """What ``ctx reduce`` of one file says: warnings, then the report or a summary."""
    report = done.report
    if not quiet:
        warn_all(report.warnings)
    if json:
        payload = single_payload(report, config)
        if done.change is not None:
            record = done.change.record
            _file(payload)["offload_dir"] = str(record) if record is not None else None
        console.write_json(orjson.dumps(payload) + b"\n")
        return
    if quiet:
        return
    if done.no_gain and done.change is not None:
        sys.stderr.write(
            f"ctx: {shown_path(done.change.path)}: nothing to gain ({_sends(report)}, and the file "
            "would not shrink to half its size); the file is unchanged\n"
        )
        return
    if done.moved is not None:
        sys.stderr.write(f"ctx: {done.moved}: this run's record goes beside it\n")
    if done.size_only and done.change is not None:
        sys.stderr.write(
            f"ctx: {shown_path(done.change.path)}: written for its size ({report.bytes_before:,} → "
            f"{report.bytes_after:,} bytes: its client loads it faster), though "
            f"{_sends(report)}\n"
        )
    if done.session:
        _print_session_change(done)
        return
    if done.change is not None and done.change.record is None:
        sys.stderr.write(
            f"ctx: {shown_path(done.change.path)}: nothing to change (it is already what this chain "
            "makes); the file is unchanged\n"
        )
        return
    name = shown_path(report.input)
    sys.stderr.write(
        f"ctx: {name}: {report.tokens_before:,} → {report.tokens_after:,} tokens "
        f"({saved(report.tokens_before, report.tokens_after)}); "
        f"offload in {shown_path(str(report.offload_dir))}\n"
    )
    if report.kept_lines:
        sys.stderr.write(
            f"ctx: {name}: the first {report.kept_lines:,} lines kept from the "
            "previous run (the file grew); the rest reduced\n"
        )
    before, after = report.resume_tokens_before, report.resume_tokens_after
    if before is not None and after is not None:
        sys.stderr.write(
            f"ctx: {name}: a resume sends {before:,} → {after:,} tokens "
            f"({saved(before, after)}); file {report.bytes_before:,} → "
            f"{report.bytes_after:,} bytes\n"
        )


def _sends(report: api.Report) -> str:
    """What a resume sends before and after, in words (the whole transcript if not known)."""
    before, after = report.resume_tokens_before, report.resume_tokens_after
    if before is None or after is None:
        return f"it would make {report.tokens_before:,} → {report.tokens_after:,} tokens"
    return f"a resume would send {before:,} → {after:,} tokens"


def _print_session_change(done: api.Reduction) -> None:
    """A session reduced in place: what a resume now sends, and how to undo it."""
    report, change = done.report, done.change
    assert change is not None  # a session is only ever changed in place
    path = shown_path(change.path)
    if any("not valid JSON" in w for w in report.warnings):
        # Kept as the client keeps them (it skips them); doctor can repair them losslessly.
        console.warn(f"{path}: repair such lines with: ctx doctor {path} --fix")
    if change.record is None:
        sys.stderr.write(f"ctx: {path}: nothing to change; the file is unchanged\n")
        return
    before, after = report.resume_tokens_before, report.resume_tokens_after
    if before is None or after is None:
        before, after = report.tokens_before, report.tokens_after
    sys.stderr.write(
        f"ctx: {path}: reduced in place; {change.bytes_before:,} → "
        f"{change.bytes_after:,} bytes; a resume sends {before:,} → {after:,} tokens "
        f"({saved(before, after)})\nctx: offload in {shown_path(change.record)}\n"
        f"ctx: undo with: ctx restore {path} --in-place\n"
    )


def print_stats(
    report: api.Report,
    data: ReportData | None,
    config: Config,
    *,
    json: bool,
    shown: tuple[bool, bool, bool],
) -> None:
    """What ``ctx stats`` of one file shows: warnings, then the JSON report or the tables.

    ``data`` is the breakdown of the run, asked for by ``shown`` = (by tool, the largest
    blocks, the monitors even when they do not look stuck).
    """
    by_tool, top, monitors = shown
    warn_all(report.warnings)
    if json:
        payload = single_payload(report, config)
        if data is not None and by_tool:
            _file(payload)["by_tool"] = [r.to_dict() for r in data.by_tool]
        if data is not None and top:
            _file(payload)["top"] = [it.to_dict() for it in data.top]
        console.write_json(orjson.dumps(payload) + b"\n")
        return
    # Here, not at the top: `ctx stats --json` prints no table and loads no Rich.
    from ctxcli.cli.render import (
        monitors_fired,
        monitors_table,
        print_table,
        report_table,
        tools_table,
        top_table,
        top_where,
    )

    print_table(report_table(report))
    if monitors or monitors_fired(report):
        print_table(monitors_table(report))
    if data is not None and by_tool:
        print_table(tools_table(data.by_tool))
    if data is not None and top:
        print_table(top_table(data.top))
        sys.stderr.writelines(f"{line}\n" for line in top_where(data.top))


def print_restored(name: str, restored: api.Restored, in_place: bool) -> None:
    """What ``ctx restore`` says: each reduction undone; in place, the outcome."""
    name = shown_path(name)
    for step in restored.steps:
        carried = f", {step.appended_bytes:,} appended bytes kept" if step.appended_bytes else ""
        sys.stderr.write(
            f"ctx: {name}: restored {step.restored_bytes:,} bytes "
            f"(sha256 {step.restored_sha256[:12]}) from {shown_path(step.offload_dir)}{carried}\n"
        )
    if not in_place:
        return
    if not restored.steps:
        sys.stderr.write(f"ctx: {name}: nothing to undo; the file is unchanged\n")
        return
    last = restored.steps[-1]
    kept = (
        f"; kept {last.appended_bytes:,} bytes the client appended since"
        if last.appended_bytes
        else ""
    )
    sys.stderr.write(
        f"ctx: restored {name}: {last.restored_bytes:,} bytes, sha256 {last.restored_sha256[:12]}…, "
        f"undoing {len(restored.steps)} change(s){kept}\n"
    )
