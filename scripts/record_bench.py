"""Run a benchmark, show its output, and keep it for the manual's Benchmarks page.

``make bench`` and ``make eval`` run every script through this one, so the tables the
manual shows are the ones the last run printed, never typed::

    python scripts/record_bench.py NAME -- python benchmarks/bench_cost.py
    python scripts/record_bench.py --check      # docs/benchmarks.md is what the records make

A run's output goes to ``docs/bench/NAME.txt`` and what ran it (the command, when, how
long, the machine) to ``docs/bench/NAME.json``; then ``docs/benchmarks.md`` is written
again from every record. A run that fails keeps the previous record and exits with the
run's code. The records are committed: a clone's manual shows the last recorded run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "docs" / "bench"
PAGE = ROOT / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Bench:
    """One recorded benchmark: its record's name, its title, and what it measures."""

    name: str
    target: str
    title: str
    what: str


BENCHES = (
    Bench(
        "bench",
        "bench",
        "Speed and memory",
        "`benchmarks/bench.py`: reduce and stats against the orjson floor, peak RSS as a "
        "multiple of the input, the offload store, restore.",
    ),
    Bench(
        "bench_live",
        "bench",
        "Live reduction",
        "`benchmarks/bench_live.py`: the `Reducer` and the proxy's engine per request.",
    ),
    Bench(
        "bench_proxy",
        "bench",
        "The proxy with the real Claude Code CLI",
        "`benchmarks/bench_proxy.py`: a scripted session direct and through `ctx wrap`.",
    ),
    Bench(
        "bench_cost",
        "bench",
        "The bill of the shared sessions",
        "`benchmarks/bench_cost.py`: the cache model against the recorded bills, ctx's "
        "default and every preset live, the meter held out, the peers priced from the records "
        "(see [Cost](cost.md) for the method).",
    ),
    Bench(
        "bench_hooks",
        "bench",
        "Claude Code hooks",
        "`benchmarks/bench_hooks.py`: the PostToolUse hook's latency, a new process per call.",
    ),
    Bench(
        "eval",
        "eval",
        "Evaluation: tokens saved and recall",
        "`benchmarks/eval.py`: every ctx stage and preset and every installed peer on the "
        "same transcripts: the share of tokens saved and of referenced terms still visible.",
    ),
)


def render_page() -> str:
    """The Benchmarks page, from the records in :data:`RECORDS`."""
    out = [
        "# Benchmarks",
        "",
        "<!-- Written by scripts/record_bench.py from docs/bench/: `make bench`, `make eval`."
        " Do not edit. -->",
        "",
        "What the last recorded run of each benchmark printed, as it printed it. The",
        "benchmarks read the real transcripts of `../shared/transcripts` where they need",
        "them; timings are of the machine named under each table (shared and noisy: the",
        "ratios measured in one run are what to compare).",
        "",
    ]
    for bench in BENCHES:
        out += [f"## {bench.title}", "", bench.what, ""]
        text, meta = RECORDS / f"{bench.name}.txt", RECORDS / f"{bench.name}.json"
        if not text.is_file() or not meta.is_file():
            out += [f"Not recorded in this checkout yet: run `make {bench.target}`.", ""]
            continue
        info = json.loads(meta.read_text())
        env = "".join(f"{k}={v} " for k, v in info.get("env", {}).items())
        out += [
            f"`{env}{info['command']}`, {info['date']}, {info['seconds']:.0f} s on "
            f"{info['cores']} cores, Python {info['python']}.",
            "",
            "```text",
            text.read_text().rstrip("\n"),
            "```",
            "",
        ]
    return "\n".join(out)


def record(name: str, command: list[str]) -> int:
    """Run ``command``, echo its output, keep it as ``name`` if it succeeds."""
    if name not in {b.name for b in BENCHES}:
        raise SystemExit(f"record_bench: unknown benchmark {name!r}: add it to BENCHES")
    start = time.monotonic()
    lines: list[bytes] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, cwd=ROOT) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            lines.append(line)
    code = proc.returncode
    if code != 0:
        print(f"record_bench: {name} exited {code}; its last record is kept", file=sys.stderr)
        return code
    RECORDS.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": " ".join(Path(command[0]).name if i == 0 else a for i, a in enumerate(command)),
        "date": dt.date.today().isoformat(),
        "seconds": round(time.monotonic() - start, 1),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("BENCH_")},
    }
    _write(RECORDS / f"{name}.txt", b"".join(lines).decode("utf-8", "replace"))
    _write(RECORDS / f"{name}.json", json.dumps(meta, indent=2) + "\n")
    _write(PAGE, render_page())
    return 0


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check docs/benchmarks.md")
    parser.add_argument("name", nargs="?")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.check:
        if PAGE.read_text() != render_page():
            print(
                "docs/benchmarks.md is not what docs/bench/ makes: run make bench", file=sys.stderr
            )
            return 1
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.name or not command:
        parser.error("give NAME -- COMMAND...")
    return record(args.name, command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
