"""Regenerate the bundled sample transcripts (deterministic; run from the repo root).

The samples are synthetic but shaped like real coding-agent sessions: a user task,
assistant tool calls, long file reads, grep output, a failing then passing test run.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).parent


def _code(rng: random.Random, lines: int) -> str:
    names = ["parse_config", "load_rows", "retry", "tokenize", "flush", "render", "merge"]
    out = []
    for i in range(lines):
        name = rng.choice(names)
        out.append(f"{i + 1:5}\tdef {name}_{i}(value, *, limit={rng.randint(1, 99)}):")
        out.append(f"{i + 1:5}\t    return _helper(value, limit) or {rng.randint(0, 999)}")
    return "\n".join(out)


def _grep(rng: random.Random, hits: int) -> str:
    files = ["src/app/models.py", "src/app/views.py", "src/app/cache.py", "tests/test_views.py"]
    return "\n".join(
        f"{rng.choice(files)}:{rng.randint(1, 900)}:    cache.get(key, default=None)  # hit {i}"
        for i in range(hits)
    )


def _pytest(failed: bool) -> str:
    body = "\n".join(f"tests/test_views.py::test_case_{i} PASSED" for i in range(120))
    tail = (
        "FAILED tests/test_views.py::test_cache_expiry - AssertionError: expected 300, got 0\n"
        "=========== 1 failed, 119 passed in 4.21s ==========="
        if failed
        else "=========== 120 passed in 4.02s ==========="
    )
    return f"============ test session starts ============\n{body}\n{tail}"


def openai_chat_support() -> list[dict[str, object]]:
    rng = random.Random(7)
    msgs: list[dict[str, object]] = [
        {"role": "system", "content": "You are a careful coding agent. Use the tools."},
        {"role": "user", "content": "The cache expiry test fails. Find out why and fix it."},
    ]
    steps = [
        ("grep", {"pattern": "cache.get", "path": "src"}, _grep(rng, 400)),
        ("read_file", {"path": "src/app/cache.py"}, _code(rng, 700)),
        ("run_tests", {"args": ["-x", "tests/test_views.py"]}, _pytest(True)),
        ("read_file", {"path": "src/app/views.py"}, _code(rng, 300)),
        ("edit_file", {"path": "src/app/cache.py", "old": "ttl=0", "new": "ttl=300"}, "ok"),
        ("run_tests", {"args": ["tests/test_views.py"]}, _pytest(False)),
    ]
    for i, (tool, args, output) in enumerate(steps):
        call_id = f"call_{i:02d}"
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": call_id, "name": tool, "content": output})
    msgs.append(
        {"role": "assistant", "content": "Fixed: the cache TTL was 0; it is 300 again and tests pass."}
    )
    return msgs


def main() -> None:
    path = HERE / "openai_chat_support.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for msg in openai_chat_support():
            fh.write(json.dumps(msg, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
