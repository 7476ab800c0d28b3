"""Latency of ``ctx hooks run post-tool-use``, the way Claude Code runs it (issue 42).

Claude Code starts the hook command once per matching tool call and waits for it, so its
whole process time is what the agent waits: each row starts ``python -m ctxcli hooks run
post-tool-use`` as a subprocess ``BENCH_HOOKS_N`` times (default 21) with a payload on
stdin, and prints the median and the 90th percentile against the targets of issue 42:

* pass-through (a small Bash output, no answer): 50 ms;
* replacement (a 300 KB Bash output cut to preview and hint, the original written to
  the offload directory): 100 ms;

each without a configuration file and with a ``ctx.toml`` in the session's directory (the
validated thresholds are cached by the file's size and mtime: the first call loads it).
The bare interpreter's start (``python -c pass``) is printed as the floor. Nothing is
asserted: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N = int(os.environ.get("BENCH_HOOKS_N", "21"))
PASS_MS, REPLACE_MS = 50, 100
LOG = "".join(f"2026-11-28 INFO step {i}: compiling module_{i % 97}.c ok\n" for i in range(5800))


def payload(cwd: Path, stdout: str, n: int) -> bytes:
    return json.dumps(
        {
            "session_id": "bench",
            "cwd": str(cwd),
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": f"toolu_{n:04d}",
            "tool_input": {"command": "cat build.log"},
            "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False},
        }
    ).encode()


def timed(argv: list[str], cwd: Path, env: dict[str, str], data: bytes) -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, input=data, capture_output=True, check=True)
    return (time.perf_counter() - start) * 1000, done.stdout


def row(label: str, times: list[float], target: int | None) -> None:
    times = sorted(times)
    median = statistics.median(times)
    p90 = times[int(0.9 * (len(times) - 1))]
    verdict = "" if target is None else ("  ok" if median <= target else "  OVER TARGET")
    goal = f"target {target} ms" if target else "floor"
    print(f"{label:<44} median {median:7.1f} ms  p90 {p90:7.1f} ms  ({goal}){verdict}")


def main() -> None:
    hook = [sys.executable, "-m", "ctxcli", "hooks", "run", "post-tool-use"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {
            **os.environ,
            "CTX_DATA_DIR": str(root / "data"),
            "CTX_CACHE_DIR": str(root / "cache"),
            "CTX_NO_PLUGINS": "1",
        }
        plain, configured = root / "plain", root / "configured"
        plain.mkdir()
        configured.mkdir()
        (configured / "ctx.toml").write_text(
            '[[stages]]\nuse = "truncate_tool_output"\nmax_chars = 20000\n'
        )
        print(f"ctx hooks run post-tool-use, {N} runs each (a new process per call)")
        floor = [timed([sys.executable, "-c", "pass"], plain, env, b"")[0] for _ in range(N)]
        row("python -c pass", floor, None)
        for label, cwd in (("no config", plain), ("ctx.toml (cached)", configured)):
            timed(hook, cwd, env, payload(cwd, LOG, 9999))  # the first call fills the cache
            small = [timed(hook, cwd, env, payload(cwd, "ok\n", n))[0] for n in range(N)]
            row(f"pass-through, {label}", small, PASS_MS)
            big: list[float] = []
            for n in range(N):
                ms, out = timed(hook, cwd, env, payload(cwd, LOG, n))
                assert b"updatedToolOutput" in out, out[:200]
                big.append(ms)
            row(f"replacement of 300 KB, {label}", big, REPLACE_MS)


if __name__ == "__main__":
    main()
