"""What reduction costs: ctx's stages and presets against the peers, on every real transcript.

For each transcript in ../shared/transcripts, the first 60% of its messages (the
past) is reduced by every method, on the same input and with the same counter
(cl100k); the rest (the future) tells which terms of the past the agent went on
to use. Each cell is ``saved/recall``: the share of the past's model-visible
tokens saved, and the share of referenced terms still visible (benchmarks/recall.py
defines both). Peers that are not installed are reported, never faked.

The last column says whether ctx's best method on that file is on or beyond the
peers' savings-vs-recall frontier: no peer saves at least as much with at least
as much recall (and more of one). ``--sweep`` prints the older head_tail vs
compress_words sweep on tool-output tokens; ``--write-floor FILE`` records every
ctx method's recall per file (tests/recall_floor.json). Usage: ``python
benchmarks/eval.py [TRANSCRIPT_DIR] [--sweep] [--write-floor FILE]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peers import (
    cozempic_output,
    headroom_compress,
    langchain_clear_conv,
    reasonblocks_head_tail,
)
from recall import Case, Measure, measure_case

from ctxcli.api import reduce_bytes
from ctxcli.core.errors import CtxError
from ctxcli.core.model import Conversation
from ctxcli.formats import load
from ctxcli.pipeline.config import build_config
from ctxcli.pipeline.options import RunOptions
from ctxcli.pipeline.run import run_pipeline
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import StageContext, TokenLedger
from ctxcli.store.naming import Preview

DEFAULT_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "transcripts"
COUNTER = get_counter("cl100k")
count = COUNTER.count

# ctx's methods: a stage at its defaults, or a preset. (label, config, Claude Code only)
CTX_METHODS: list[tuple[str, dict[str, Any], bool]] = [
    ("head_tail", {"stages": [{"use": "head_tail"}]}, False),
    ("compress_words", {"stages": [{"use": "compress_words"}]}, False),
    ("clear", {"stages": [{"use": "clear_tool_results"}]}, False),
    ("reasonblocks", {"preset": "reasonblocks"}, False),
    ("swe-agent", {"preset": "swe-agent"}, False),
    ("synaptic", {"preset": "synaptic"}, False),
    ("eino", {"preset": "eino"}, False),
    ("keep-terms", {"preset": "keep-terms"}, False),
    ("cc-resume", {"preset": "claude-code-resume"}, True),
]
PEERS = ["rb head+tail", "LC clear", "cz standard", "cz aggressive", "headroom"]


@dataclass
class EvalCase:
    """A transcript's case, and for JSON-lines files the raw bytes of its past."""

    case: Case
    fmt: str
    past_raw: bytes | None


@dataclass
class FileResult:
    """Every method's measure on one file; a missing method says why."""

    name: str
    measures: dict[str, Measure] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


def _prefix(raw: bytes, conv: Conversation, cut: int) -> bytes | None:
    """The raw records of the first ``cut`` messages of a JSON-lines file, if they load back."""
    if cut >= len(conv.messages) or conv.messages[cut].key is None:
        return None
    lines = raw.splitlines(keepends=True)
    records = [i for i, line in enumerate(lines) if line.strip()]
    key = conv.messages[cut].key
    if key is None or key >= len(records):
        return None
    past = b"".join(lines[: records[key]])
    try:
        again = load(past, "past.jsonl", on_invalid="keep").conversation
    except CtxError:
        return None
    return past if len(again.messages) == cut else None


def load_cases(directory: Path, notes: list[str]) -> list[EvalCase]:
    """Every transcript ctx can load, split into past and future."""
    cases: list[EvalCase] = []
    for path in sorted(directory.iterdir()):
        if path.suffix not in (".jsonl", ".json", ".traj"):
            continue
        raw = path.read_bytes()
        try:
            conv = load(raw, str(path)).conversation
        except CtxError:
            try:
                conv = load(raw, str(path), on_invalid="keep").conversation
                notes.append(f"{path.name}: loaded with on_invalid=keep")
            except CtxError as exc:
                notes.append(f"skipped {path.name}: {str(exc).split(': ', 1)[-1][:90]}")
                continue
        case = Case.split(path.name, conv)
        if not case.referenced:
            notes.append(f"skipped {path.name}: no referenced term in its first 60%")
            continue
        past_raw = _prefix(raw, conv, case.cut) if path.suffix == ".jsonl" else None
        cases.append(EvalCase(case, conv.format, past_raw))
    return cases


def run_ctx(case: Case, config: dict[str, Any]) -> Conversation:
    """``case.past`` reduced by a ctx config (nothing written)."""
    cfg = build_config(config, "eval")
    ctx = StageContext(TokenLedger(COUNTER), Preview("ctx-offload"))
    return run_pipeline(case.past, cfg.stages, ctx)[0]


def _bytes_conv(data: bytes) -> Conversation:
    return load(data, "past.jsonl", on_invalid="keep").conversation


def ctx_measures(ev: EvalCase, result: FileResult) -> None:
    """Every ctx method on one case."""
    for label, config, cc_only in CTX_METHODS:
        if cc_only:
            if ev.fmt != "claude_code" or ev.past_raw is None:
                continue
            options = RunOptions(monitors=False)
            out = reduce_bytes(ev.past_raw, config=build_config(config, "eval"), options=options)
            reduced = _bytes_conv(out.output)
        else:
            reduced = run_ctx(ev.case, config)
        result.measures[label] = measure_case(ev.case, reduced, count)


def _peer(result: FileResult, label: str, ev: EvalCase, run: Callable[[], Conversation]) -> None:
    try:
        result.measures[label] = measure_case(ev.case, run(), count)
    except ImportError as exc:
        result.missing[label] = f"not installed: {exc.name or exc}"


def peer_measures(ev: EvalCase, result: FileResult, notes: set[str]) -> None:
    """Every peer that applies to one case."""
    past = ev.case.past
    _peer(result, "rb head+tail", ev, lambda: reasonblocks_head_tail(past))
    # ClearToolUsesEdit's default trigger (100,000 tokens) never fires on these pasts;
    # trigger 0 with its default keep (3) is the edit at work.
    _peer(result, "LC clear", ev, lambda: langchain_clear_conv(past, count, trigger=0, keep=3))
    if ev.fmt == "claude_code" and ev.past_raw is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "past.jsonl"
            path.write_bytes(ev.past_raw)
            for rx in ("standard", "aggressive"):
                _peer(
                    result,
                    f"cz {rx}",
                    ev,
                    lambda rx=rx: _bytes_conv(cozempic_output(path, rx)),  # type: ignore[misc]
                )

    def headroom() -> Conversation:
        conv, transforms = headroom_compress(past)
        notes.update(":".join(t.split(":")[:2]) for t in transforms)
        return conv

    _peer(result, "headroom", ev, headroom)


def dominated(point: Measure, by: Measure) -> bool:
    """True if ``by`` saves at least as much with at least as much recall, and more of one."""
    a = (point.context_saved, point.recall)
    b = (by.context_saved, by.recall)
    return b[0] >= a[0] and b[1] >= a[1] and b != a


RECALL_BAR = 0.9


def best_ctx(result: FileResult) -> str:
    """ctx's best method on a file: most tokens saved at >= 90% recall (else most recall)."""
    ours = {k: v for k, v in result.measures.items() if k not in PEERS}
    good = [k for k, v in ours.items() if v.recall >= RECALL_BAR]
    if good:
        return max(good, key=lambda k: (ours[k].context_saved, ours[k].recall))
    return max(ours, key=lambda k: (ours[k].recall, ours[k].context_saved))


def verdict(result: FileResult) -> str:
    """Whether ctx's best method is on or beyond the peers' savings-vs-recall frontier."""
    best = best_ctx(result)
    point = result.measures[best]
    peers = {k: v for k, v in result.measures.items() if k in PEERS}
    over = [k for k, p in peers.items() if dominated(point, p)]
    if over:
        return f"BELOW: {best} (dominated by {', '.join(over)})"
    beaten = [k for k, p in peers.items() if dominated(p, point)]
    if beaten:
        return f"beyond: {best} (dominates {', '.join(beaten)})"
    return f"on: {best}"


def evaluate(directory: Path, notes: list[str], peers: bool = True) -> list[FileResult]:
    """Measure every method on every case."""
    results: list[FileResult] = []
    transforms: set[str] = set()
    for ev in load_cases(directory, notes):
        result = FileResult(ev.case.name)
        ctx_measures(ev, result)
        if peers:
            peer_measures(ev, result, transforms)
        results.append(result)
    if transforms:
        notes.append("headroom ran: " + ", ".join(sorted(transforms)))
    return results


def short(name: str) -> str:
    """A file name short enough for a table column."""
    for suffix in (".traj.json", ".jsonl", ".traj", ".json"):
        name = name.removesuffix(suffix)
    return name if len(name) <= 28 else name[:27] + "…"


def print_table(results: Sequence[FileResult]) -> None:
    """One row per file, one ``saved/recall`` cell per method, and the frontier verdict."""
    columns = [m[0] for m in CTX_METHODS] + PEERS
    widths = [max(len(c), 7) for c in columns]
    head = f"{'file':28} " + " ".join(f"{c:>{w}}" for c, w in zip(columns, widths, strict=True))
    print(head + "  ctx's best (>= 90% recall) vs the peers' frontier")
    print("-" * (len(head) + 20))
    missing: dict[str, str] = {}
    for r in results:
        cells = []
        for c, w in zip(columns, widths, strict=True):
            m = r.measures.get(c)
            cell = f"{m.context_saved * 100:.0f}/{m.recall * 100:.0f}" if m else "-"
            cells.append(f"{cell:>{w}}")
            if c in r.missing:
                missing[c] = r.missing[c]
        print(f"{short(r.name):28} " + " ".join(cells) + f"  {verdict(r)}")
    print(
        "\ncells: % of the past's model-visible cl100k tokens saved / % of referenced terms "
        "kept; '-': does not apply (cc-resume, cz: Claude Code files only)"
    )
    for label, why in sorted(missing.items()):
        print(f"{label}: {why}")


def floor_of(results: Sequence[FileResult]) -> dict[str, dict[str, float]]:
    """Every ctx method's recall per file, in points (for tests/recall_floor.json)."""
    floor: dict[str, dict[str, float]] = {}
    for r in results:
        for label, m in r.measures.items():
            if label not in PEERS:
                floor.setdefault(label, {})[r.name] = round(m.recall * 100, 2)
    return floor


# -- the older sweep: head_tail against compress_words on tool-output tokens ----------

SWEEP: list[tuple[str, list[dict[str, Any]]]] = [
    ("head_tail 3600/1800/1400", [{"use": "head_tail", "threshold_chars": 3600}]),
    ("head_tail 1800/900/700 (default)", [{"use": "head_tail"}]),
    (
        "head_tail 800/400/300",
        [{"use": "head_tail", "threshold_chars": 800, "head_chars": 400, "tail_chars": 300}],
    ),
    (
        "head_tail 300/150/100",
        [{"use": "head_tail", "threshold_chars": 300, "head_chars": 150, "tail_chars": 100}],
    ),
    ("compress_words (default)", [{"use": "compress_words"}]),
    (
        "compress_words 0.55/0.30 recent 3",
        [
            {
                "use": "compress_words",
                "keep_ratio_mid": 0.55,
                "keep_ratio_old": 0.30,
                "recent_calls": 3,
            }
        ],
    ),
    (
        "compress_words ceiling",  # every unprotected word dropped, nothing recent spared
        [
            {
                "use": "compress_words",
                "keep_ratio_mid": 0.01,
                "keep_ratio_old": 0.01,
                "recent_calls": 0,
                "min_content_words": 1,
            }
        ],
    ),
    ("head_tail + compress_words", [{"use": "head_tail"}, {"use": "compress_words"}]),
]


def print_sweep(directory: Path, notes: list[str]) -> None:
    """Tool-output tokens saved and recall per file for each sweep setting."""
    cases = load_cases(directory, notes)
    print("\ntool-output tokens saved / recall, per file (first 60% of each)")
    for label, stages in SWEEP:
        start = time.perf_counter()
        cells = []
        for ev in cases:
            m = measure_case(ev.case, run_ctx(ev.case, {"stages": stages}), count)
            cells.append(f"{short(ev.case.name)} {m.tool_saved:.0%}/{m.recall:.0%}")
        print(f"{label} ({time.perf_counter() - start:.1f}s)\n    " + "\n    ".join(cells))


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--sweep", action="store_true", help="Also print the compress_words sweep.")
    parser.add_argument("--write-floor", type=Path, help="Write each ctx method's recall here.")
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        print(f"eval: {args.directory} not found; pass the transcript directory.", file=sys.stderr)
        return 2
    notes: list[str] = []
    start = time.perf_counter()
    results = evaluate(args.directory, notes)
    print_table(results)
    for note in notes:
        print(f"note: {note}")
    print(f"({len(results)} files, {time.perf_counter() - start:.0f}s)")
    if args.write_floor:
        floor = floor_of(results)
        args.write_floor.write_text(json.dumps(floor, indent=1, sort_keys=True) + "\n")
        print(f"wrote {args.write_floor}")
    if args.sweep:
        print_sweep(args.directory, [])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
