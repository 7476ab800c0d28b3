"""Per-call overhead of the in-process reducer in a growing agent loop (issue 24).

An agent conversation grows by one tool round (an assistant call and its result) per
model call. Once it holds ``BENCH_LIVE_MESSAGES`` messages (default 200), the next
``BENCH_LIVE_CALLS`` calls (default 30) are timed, for:

* ``ctxcli.Reducer`` (preset eino) on OpenAI chat dicts, with the approx and the
  cl100k counter;
* ``CtxMiddleware``'s conversion and reduction of LangChain messages (approx), i.e.
  what ``wrap_model_call`` adds to a LangChain model call;
* LangChain's own ``ContextEditingMiddleware`` work on the same messages: its deepcopy
  and ``ClearToolUsesEdit(trigger=30000, keep=1)`` with LangChain's approximate counter
  and with a cl100k counter (ctx's engine over the message texts, uncached, as
  LangChain would call it).

The median and 90th percentile per call are printed with the targets of issue 24:
approx <= 5 ms, cl100k <= 20 ms (each row: the best of ``BENCH_LIVE_REPEATS`` runs,
default 3, by median). Nothing is asserted.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from copy import deepcopy
from typing import Any

MESSAGES = int(os.environ.get("BENCH_LIVE_MESSAGES", "200"))
CALLS = int(os.environ.get("BENCH_LIVE_CALLS", "30"))
REPEATS = int(os.environ.get("BENCH_LIVE_REPEATS", "3"))


def tool_round(i: int) -> list[dict[str, Any]]:
    """One assistant call and its result; sizes vary like a coding agent's reads and greps."""
    size = (600, 2500, 8000, 1200, 70000)[i % 5] if i % 23 else 70_000
    body = "".join(
        f"src/mod{i}.py:{n}: def handler_{n}(x): return x * {n}\n" for n in range(size // 40 + 1)
    )
    return [
        {
            "role": "assistant",
            "content": f"Reading part {i}.",
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "arguments": json.dumps({"path": f"mod{i}.py"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"call_{i}", "content": body[:size]},
    ]


def conversation(rounds: int) -> list[dict[str, Any]]:
    msgs = [
        {"role": "system", "content": "You are a coding agent. " * 40},
        {"role": "user", "content": "Find and fix the failing test."},
    ]
    for i in range(rounds):
        msgs += tool_round(i)
    return msgs


def grow(
    step: Callable[[list[Any]], None], convert: Callable[[list[dict[str, Any]]], list[Any]]
) -> list[float]:
    """Feed the conversation one round per call; time the calls past MESSAGES messages."""
    start = (MESSAGES - 2) // 2
    full = conversation(start + CALLS)
    msgs = convert(full)
    times = []
    for r in range(1, start + CALLS + 1):
        view = msgs[: 2 + 2 * r]
        t0 = time.perf_counter()
        step(view)
        if r > start:
            times.append(time.perf_counter() - t0)
    return times


def best(make: Callable[[], list[float]]) -> list[float]:
    """The run (of REPEATS, each from scratch) with the lowest median: the machine is shared."""
    return min((make() for _ in range(REPEATS)), key=statistics.median)


def row(name: str, times: list[float], target_ms: float | None) -> tuple[str, float, float, str]:
    med = statistics.median(times) * 1000
    p90 = sorted(times)[int(0.9 * (len(times) - 1))] * 1000
    verdict = "" if target_ms is None else ("OK" if med <= target_ms else "SHORT")
    return name, med, p90, (f"<= {target_ms:g} ms {verdict}" if target_ms else "")


def main() -> int:
    from ctxcli import Reducer

    rows = []
    with tempfile.TemporaryDirectory(prefix="ctx-bench-live-") as tmp:
        for tokenizer, target in (("approx", 5.0), ("cl100k", 20.0)):

            def ctx_run(tokenizer: str = tokenizer) -> list[float]:
                reducer = Reducer(
                    preset="eino", offload_dir=f"{tmp}/{tokenizer}", tokenizer=tokenizer
                )
                return grow(reducer.reduce, lambda m: m)

            rows.append(row(f"ctx Reducer, {tokenizer}", best(ctx_run), target))
        try:
            from langchain.agents.middleware.context_editing import ClearToolUsesEdit
            from langchain_core.messages import convert_to_messages
            from langchain_core.messages.utils import count_tokens_approximately

            from ctxcli.agent.langchain_middleware import CtxMiddleware
        except ImportError as exc:
            print(f"langchain: not available ({exc}); LangChain rows skipped", file=sys.stderr)
        else:
            to_lc = convert_to_messages

            def mw_run() -> list[float]:
                mw = CtxMiddleware(preset="eino", offload_dir=f"{tmp}/mw", tokenizer="approx")
                return grow(mw.session().reduce, to_lc)

            rows.append(row("ctx CtxMiddleware (LangChain msgs), approx", best(mw_run), 5.0))
            from ctxcli.services.tokens.engines import load_engine

            count = load_engine("cl100k")[1]  # the engine ctx counts with: same counter

            def cl100k(messages: Any) -> int:
                n = 0
                for m in messages:
                    n += count(m.content if isinstance(m.content, str) else str(m.content))
                    for c in getattr(m, "tool_calls", None) or []:
                        n += count(c["name"] + json.dumps(c["args"]))
                return n

            for label, counter in (("approx", count_tokens_approximately), ("cl100k", cl100k)):
                edit = ClearToolUsesEdit(trigger=30000, keep=1)

                def lc_step(m: list[Any], edit: Any = edit, counter: Any = counter) -> None:
                    edited = deepcopy(list(m))  # what ContextEditingMiddleware does per call
                    edit.apply(edited, count_tokens=counter)

                times = best(lambda step=lc_step: grow(step, to_lc))
                rows.append(row(f"LangChain ClearToolUsesEdit, {label}", times, None))
    print(
        f"\nper model call, conversation of {MESSAGES} messages growing by one tool round "
        f"per call ({CALLS} calls timed)\n"
    )
    print(f"{'measurement':44} {'median ms':>10} {'p90 ms':>8}  target")
    for name, med, p90, note in rows:
        print(f"{name:44} {med:10.2f} {p90:8.2f}  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
