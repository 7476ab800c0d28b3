"""ctx against its peers on every real transcript in ../shared/transcripts, same counter.

Three detail tables (cl100k tokens), printed by ``make eval-peers`` (``make eval``
prints the summary table of benchmarks/eval.py):

1. clear_tool_results against LangChain's ClearToolUsesEdit at equal settings
   (trigger = max_tokens, keep = keep_results, keep_rounds = 0) on whole files:
   tool-output tokens saved, with ctx's three hints (marker '[ctx cleared]', the
   default short form naming the offload file, the long sentence), and the tokens
   one hint costs on average.
2. Observation masking (the swe-agent preset) on every file with tool output, and
   the hybrid (masking, then an extractive summary): tokens saved and recall of
   referenced terms on each file's first 60%.
3. The claude-code-resume preset against cozempic's standard and aggressive
   prescriptions on every Claude Code file: file bytes, and the tokens a
   ``claude --resume`` sends.

A peer that is not installed is reported, never faked. Usage:
``python benchmarks/eval_peers.py [TRANSCRIPT_DIR]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from peers import cozempic_output, langchain_clear, resume_tokens, tool_outputs
from recall import Case, measure_case

from ctxcli.api import reduce_bytes
from ctxcli.core.errors import CtxError
from ctxcli.core.hints import is_cleared
from ctxcli.core.model import Conversation
from ctxcli.formats import load
from ctxcli.pipeline.config import build_config
from ctxcli.pipeline.run import run_pipeline
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import StageContext, TokenLedger
from ctxcli.store.naming import Preview

DEFAULT_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "transcripts"
SETTINGS = [(0, 3), (30000, 3)]  # (trigger = max_tokens, keep = keep_results)
HINTS = ("marker", "short", "long")
COUNTER = get_counter("cl100k")
count = COUNTER.count


def _load(directory: Path) -> list[tuple[str, bytes, Conversation]]:
    out = []
    for path in sorted(directory.iterdir()):
        if path.suffix not in (".jsonl", ".json", ".traj"):
            continue
        raw = path.read_bytes()
        try:
            conv = load(raw, str(path)).conversation
        except CtxError as exc:
            print(f"note: skipped {path.name}: {exc}")
            continue
        if tool_outputs(conv):
            out.append((path.name, raw, conv))
    return out


def _reduce(conv: Conversation, stages: list[dict[str, object]]) -> Conversation:
    config = build_config({"stages": stages}, "eval")
    ctx = StageContext(TokenLedger(COUNTER), Preview("ctx-offload"))
    return run_pipeline(conv, config.stages, ctx)[0]


def _saved(before: int, outputs: list[str]) -> float:
    return 1 - sum(map(count, outputs)) / before if before else 0.0


def clear_table(cases: list[tuple[str, bytes, Conversation]]) -> None:
    """Table 1: ctx's clear against LangChain's at equal settings."""
    try:
        import langchain  # noqa: F401
    except ImportError:
        print("LangChain is not installed (pip install -e '.[bench]'): table 1 skipped\n")
        return
    hint_tokens: dict[str, list[int]] = {h: [] for h in HINTS}
    for trigger, keep in SETTINGS:
        print(f"clear_tool_results vs LangChain ClearToolUsesEdit: trigger {trigger}, keep {keep}")
        head = f"{'file':50} {'tool tokens':>11} {'LangChain':>9} " + " ".join(
            f"{'ctx ' + h:>10}" for h in HINTS
        )
        print(head)
        print("-" * len(head))
        worst = 1.0
        for name, _raw, conv in cases:
            before = sum(map(count, tool_outputs(conv)))
            theirs = _saved(before, langchain_clear(conv, count, trigger=trigger, keep=keep))
            cells = []
            for hint in HINTS:
                stage = {
                    "use": "clear_tool_results",
                    "max_tokens": trigger,
                    "keep_rounds": 0,
                    "keep_results": keep,
                    "hint": hint,
                }
                outputs = tool_outputs(_reduce(conv, [stage]))
                hint_tokens[hint] += [count(t) for t in outputs if is_cleared(t)]
                saved = _saved(before, outputs)
                if hint == "marker":
                    worst = min(worst, saved - theirs)
                cells.append(f"{saved:>10.1%}")
            print(f"{name[:50]:50} {before:>11,} {theirs:>9.1%} " + " ".join(cells))
        verdict = "at or above" if worst >= 0 else "BELOW"
        print(f"ctx marker is {verdict} LangChain on every file (worst margin {worst:+.1%})\n")
    per_hint = ", ".join(f"{h} {sum(v) / len(v):.1f}" for h, v in hint_tokens.items() if v)
    print(f"tokens per hint: LangChain '[cleared]' {count('[cleared]')}, ctx {per_hint}\n")


def masking_table(cases: list[tuple[str, bytes, Conversation]]) -> None:
    """Table 2: observation masking, and masking with a summary of what it masked.

    As in benchmarks/eval.py, only the first 60% of each transcript (the past) is
    reduced; tokens saved and recall are benchmarks/recall.py's.
    """
    mask = {"use": "clear_tool_results", "max_tokens": 0, "keep_rounds": 0, "keep_results": 10}
    summary = {"use": "summarize", "trigger": "always", "keep_messages": 20}
    variants = {"masking": [mask], "masking + summary": [mask, summary]}
    print(
        "observation masking (swe-agent preset: last 10 observations verbatim) and the hybrid "
        "with an extractive summary of all but the last 20 messages; first 60% of each file"
    )
    head = f"{'file':50} " + " ".join(f"{v + ' saved/recall':>30}" for v in variants)
    print(head)
    print("-" * len(head))
    for name, _raw, conv in cases:
        case = Case.split(name, conv)
        cells = []
        for stages in variants.values():
            m = measure_case(case, _reduce(case.past, stages), count)
            cells.append(f"{m.context_saved:>21.1%} {m.recall:>7.1%}")
        print(f"{name[:50]:50} " + " ".join(cells))
    print()


def cozempic_table(directory: Path, cases: list[tuple[str, bytes, Conversation]]) -> None:
    """Table 3: the Claude Code preset against cozempic."""
    try:
        import cozempic  # noqa: F401
    except ImportError:
        print("cozempic is not installed (pip install cozempic): table 3 skipped\n")
        return
    config = build_config({"preset": "claude-code-resume"}, "eval")
    print("claude-code-resume vs cozempic (bytes of the file; tokens a resume sends)")
    head = (
        f"{'file':44} {'original':>17} {'ctx preset':>17} {'cz standard':>17} {'cz aggressive':>17}"
    )
    print(head)
    print("-" * len(head))
    ok = True
    for name, raw, conv in cases:
        if conv.format != "claude_code":
            continue
        ours = reduce_bytes(raw, config=config).output
        standard = cozempic_output(directory / name, "standard")
        aggressive = cozempic_output(directory / name, "aggressive")
        cells = []
        for data in (raw, ours, standard, aggressive):
            cells.append(f"{len(data) / 1024:>7.1f}K {resume_tokens(data, name, count):>7,}t")
        ok &= len(ours) < len(aggressive)
        ok &= resume_tokens(ours, name, count) < resume_tokens(standard, name, count)
        print(f"{name[:44]:44} " + " ".join(cells))
    verdict = "meets" if ok else "MISSES"
    print(
        f"ctx {verdict} the target on every file: smaller than cz aggressive, "
        "fewer resume tokens than cz standard\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print the three tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        print(f"eval: {args.directory} not found; pass the transcript directory.", file=sys.stderr)
        return 2
    cases = _load(args.directory)
    clear_table(cases)
    masking_table(cases)
    cozempic_table(args.directory, cases)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
