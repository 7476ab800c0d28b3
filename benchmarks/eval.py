"""Evaluate head_tail and compress_words on the real transcripts in ../shared/transcripts.

For each transcript ctx can load, only the first 60% of its messages are reduced (the
"past"); the remaining 40% (the "future") tells which facts of the past were still
needed. For every setting this prints:

- tool-output tokens saved: cl100k tokens of the past's tool results, before and
  after the stage (markers and hints included);
- referenced terms kept: identifiers, paths and numbers of at least 4 characters
  that occur in a past tool output and again in the future, and that are still
  visible in the reduced past's tool outputs;
- referenced names kept: the same for capitalised words (names, places, commands),
  which the heuristic classifier does not protect outright.

At the end each compress_words row is compared with head_tail at equal savings
(head_tail's curve interpolated linearly). Usage: ``python benchmarks/eval.py
[TRANSCRIPT_DIR] [--per-file]``.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxcli.core.errors import CtxError
from ctxcli.core.model import Conversation, Kind, visible_texts
from ctxcli.formats import load
from ctxcli.pipeline.config import build_config
from ctxcli.pipeline.offload import DryRunOffload
from ctxcli.pipeline.run import run_pipeline
from ctxcli.services.counters import get_counter
from ctxcli.stages import StageContext, TokenLedger

PAST_SHARE = 0.6
DEFAULT_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "transcripts"

SETTINGS: list[tuple[str, list[dict[str, Any]]]] = [
    (
        "head_tail 6000/3000/2400",
        [{"use": "head_tail", "threshold_chars": 6000, "head_chars": 3000, "tail_chars": 2400}],
    ),
    (
        "head_tail 3600/1800/1400",
        [{"use": "head_tail", "threshold_chars": 3600, "head_chars": 1800, "tail_chars": 1400}],
    ),
    ("head_tail 1800/900/700 (default)", [{"use": "head_tail"}]),
    (
        "head_tail 1200/600/400",
        [{"use": "head_tail", "threshold_chars": 1200, "head_chars": 600, "tail_chars": 400}],
    ),
    (
        "head_tail 800/400/300",
        [{"use": "head_tail", "threshold_chars": 800, "head_chars": 400, "tail_chars": 300}],
    ),
    (
        "head_tail 500/250/150",
        [{"use": "head_tail", "threshold_chars": 500, "head_chars": 250, "tail_chars": 150}],
    ),
    (
        "head_tail 300/150/100",
        [{"use": "head_tail", "threshold_chars": 300, "head_chars": 150, "tail_chars": 100}],
    ),
    ("compress_words 0.55/0.30 (default)", [{"use": "compress_words"}]),
    (
        "compress_words 0.45/0.25",
        [{"use": "compress_words", "keep_ratio_mid": 0.45, "keep_ratio_old": 0.25}],
    ),
    (
        "compress_words 0.35/0.20",
        [{"use": "compress_words", "keep_ratio_mid": 0.35, "keep_ratio_old": 0.20}],
    ),
    (
        "compress_words 0.25/0.15 recent 1",
        [
            {
                "use": "compress_words",
                "keep_ratio_mid": 0.25,
                "keep_ratio_old": 0.15,
                "recent_cutoff": 1,
            }
        ],
    ),
    ("head_tail + compress_words (defaults)", [{"use": "head_tail"}, {"use": "compress_words"}]),
]

_TOKEN = re.compile(r"[\w./\\:-]+")
_NAME = re.compile(r"\b[A-Z][a-z]{3,}\b")


def terms(text: str) -> set[str]:
    """Identifiers, paths and numbers of at least 4 characters in ``text``."""
    found: set[str] = set()
    for raw in _TOKEN.findall(text):
        tok = raw.strip(".:-")
        if len(tok) < 4:
            continue
        digits = sum(c.isdigit() for c in tok)
        letters = sum(c.isalpha() for c in tok)
        is_number = digits >= 4 and letters == 0
        is_path = ("/" in tok or "\\" in tok) and letters > 0
        is_ident = letters > 0 and (
            "_" in tok
            or re.search(r"[a-z][A-Z]", tok) is not None
            or re.search(r"\w\.\w", tok) is not None
            or (digits > 0 and re.fullmatch(r"[A-Za-z0-9_]+", tok) is not None)
        )
        if is_number or is_path or is_ident:
            found.add(tok)
    return found


def names(text: str) -> set[str]:
    """Capitalised words of at least 4 letters (names, places, commands)."""
    return set(_NAME.findall(text))


@dataclass
class Case:
    """One transcript cut into a past to reduce and a future that refers back to it."""

    name: str
    past: Conversation
    ref_terms: set[str]
    ref_names: set[str]


@dataclass
class Row:
    """Totals of one setting over all transcripts."""

    label: str
    tokens_before: int = 0
    tokens_after: int = 0
    terms_total: int = 0
    terms_kept: int = 0
    names_total: int = 0
    names_kept: int = 0
    seconds: float = 0.0

    @property
    def saved(self) -> float:
        return 1 - self.tokens_after / self.tokens_before if self.tokens_before else 0.0

    @property
    def terms(self) -> float:
        return self.terms_kept / self.terms_total if self.terms_total else 1.0

    @property
    def names(self) -> float:
        return self.names_kept / self.names_total if self.names_total else 1.0


def tool_outputs(conv: Conversation) -> list[str]:
    """Texts of every tool result."""
    return [b.text for _ref, b in conv.iter_blocks(Kind.TOOL_RESULT)]


def load_cases(directory: Path, notes: list[str]) -> list[Case]:
    """Every transcript ctx can load, split into past and future."""
    cases: list[Case] = []
    for path in sorted(directory.iterdir()):
        if path.suffix not in (".jsonl", ".json", ".traj"):
            continue
        raw = path.read_bytes()
        try:
            doc = load(raw, str(path))
        except CtxError:
            try:
                # A real file may hold a malformed line; pass it through like `--on-invalid keep`.
                doc = load(raw, str(path), on_invalid="keep")
                notes.append(f"{path.name}: loaded with on_invalid=keep")
            except CtxError as exc:
                notes.append(f"skipped {path.name}: {str(exc).split(': ', 1)[-1][:90]}")
                continue
        messages = doc.conversation.messages
        cut = int(len(messages) * PAST_SHARE)
        past = doc.conversation.with_messages(messages[:cut])
        future = "\n".join(t for m in messages[cut:] for t in visible_texts(m))
        outputs = "\n".join(tool_outputs(past))
        if not outputs:
            notes.append(f"skipped {path.name}: no tool output in its first 60%")
            continue
        ref_terms = terms(outputs) & terms(future)
        ref_names = names(outputs) & names(future)
        cases.append(Case(path.name, past, ref_terms, ref_names))
    return cases


def run(cases: Sequence[Case], label: str, stages: list[dict[str, Any]], per_file: bool) -> Row:
    """Reduce every case's past with ``stages`` and total the measures."""
    config = build_config({"stages": stages}, label)
    counter = get_counter("cl100k")
    row = Row(label)
    for case in cases:
        ctx = StageContext(TokenLedger(counter), DryRunOffload("ctx-offload"))
        start = time.perf_counter()
        reduced, _reports = run_pipeline(case.past, config.stages, ctx)
        row.seconds += time.perf_counter() - start
        before = sum(counter.count(t) for t in tool_outputs(case.past))
        after = sum(counter.count(t) for t in tool_outputs(reduced))
        visible = "\n".join(tool_outputs(reduced))
        kept_terms = len(case.ref_terms & terms(visible))
        kept_names = len(case.ref_names & names(visible))
        row.tokens_before += before
        row.tokens_after += after
        row.terms_total += len(case.ref_terms)
        row.terms_kept += kept_terms
        row.names_total += len(case.ref_names)
        row.names_kept += kept_names
        if per_file:
            saved = 1 - after / before if before else 0.0
            print(
                f"    {case.name:52} saved {saved:6.1%}  terms {kept_terms}/{len(case.ref_terms)}"
                f"  names {kept_names}/{len(case.ref_names)}"
            )
    return row


def interpolate(points: Iterable[tuple[float, float]], x: float) -> float | None:
    """Linear interpolation of y at ``x`` on a curve; None outside its range."""
    pts = sorted(points)
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Print the evaluation table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--per-file", action="store_true", help="Also print one line per file.")
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        print(f"eval: {args.directory} not found; pass the transcript directory.", file=sys.stderr)
        return 2
    notes: list[str] = []
    cases = load_cases(args.directory, notes)
    for note in notes:
        print(f"note: {note}")
    print(
        f"{len(cases)} transcripts; past = first {PAST_SHARE:.0%} of messages; "
        f"{sum(len(c.ref_terms) for c in cases)} referenced terms, "
        f"{sum(len(c.ref_names) for c in cases)} referenced names\n"
    )
    header = f"{'setting':38} {'tool tokens':>21} {'saved':>7} {'terms kept':>11} {'names kept':>11} {'time':>6}"
    print(header)
    print("-" * len(header))
    rows: list[Row] = []
    for label, stages in SETTINGS:
        if args.per_file:
            print(f"  {label}")
        row = run(cases, label, stages, args.per_file)
        rows.append(row)
        print(
            f"{label:38} {row.tokens_before:>9,} → {row.tokens_after:>9,} {row.saved:>7.1%} "
            f"{row.terms:>11.1%} {row.names:>11.1%} {row.seconds:>5.1f}s"
        )
    head_curve = [(r.saved, r.terms) for r in rows if r.label.startswith("head_tail ")]
    head_names = [(r.saved, r.names) for r in rows if r.label.startswith("head_tail ")]
    print("\ncompress_words vs head_tail at equal tool-output savings (head_tail interpolated):")
    for row in rows:
        if not row.label.startswith("compress_words"):
            continue
        ht_terms = interpolate(head_curve, row.saved)
        ht_names = interpolate(head_names, row.saved)
        if ht_terms is None or ht_names is None:
            print(f"  {row.label:38} saved {row.saved:.1%}: outside head_tail's range")
            continue
        print(
            f"  {row.label:38} saved {row.saved:.1%}: terms {row.terms:.1%} vs {ht_terms:.1%}, "
            f"names {row.names:.1%} vs {ht_names:.1%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
