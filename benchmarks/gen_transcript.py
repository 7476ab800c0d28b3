"""Generate a large, realistic synthetic OpenAI-chat transcript for benchmarks.

The session looks like a coding agent at work: a system prompt, a task, then rounds of
assistant tool calls answered by tool results. The results mix what real agents read:
source files, pytest logs, grep output, JSON API answers, and a share of CJK text and
emoji (tokenizers are slowest on those). Files are re-read now and then, as agents do,
so a cache that counts each distinct text once has something to find. Deterministic:
the same seed and size give the same bytes.

Usage::

    python benchmarks/gen_transcript.py OUT.jsonl [--mb 20] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import orjson

_WORDS = (
    "cache config request response token session parser buffer stream worker retry "
    "timeout handler record schema client server value index batch merge flush limit "
    "offset commit branch module package import export render template field column"
).split()
_CJK = (
    "缓存配置请求响应会话解析缓冲流工作重试超时处理记录模式客户端服务器索引批量合并刷新"
    "限制偏移提交分支模块导入导出渲染模板字段列测试失败成功错误警告信息调试日志文件目录"
)
_EMOJI = "✅❌⚠️🚀🔥🐛📦🧪✨💥🔧📝"
_FILES = [
    f"src/{pkg}/{mod}.py"
    for pkg in ("app", "core", "api", "store", "util")
    for mod in ("models", "views", "cache", "parser", "client", "config", "tasks", "schema")
]


def _ident(rng: random.Random) -> str:
    return "_".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))


def source_file(rng: random.Random, lines: int) -> str:
    """A Python file as a read tool shows it (numbered lines)."""
    out: list[str] = ['"""Module docstring: ' + " ".join(rng.sample(_WORDS, 8)) + '."""', ""]
    while len(out) < lines:
        name = _ident(rng)
        args = ", ".join(_ident(rng) for _ in range(rng.randint(0, 3)))
        out.append(f"def {name}({args}):")
        out.append(f'    """{rng.choice(_WORDS).capitalize()} the {rng.choice(_WORDS)}."""')
        for _ in range(rng.randint(2, 9)):
            lhs, fn, arg = _ident(rng), _ident(rng), _ident(rng)
            out.append(f"    {lhs} = {fn}({arg}, limit={rng.randint(0, 4096)})")
        out.append(f"    return {_ident(rng)}")
        out.append("")
    return "\n".join(f"{i + 1:6}\t{line}" for i, line in enumerate(out[:lines]))


def pytest_log(rng: random.Random, tests: int) -> str:
    """A pytest run with a few failures and a traceback."""
    lines = ["============================= test session starts =============================="]
    lines.append("platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0")
    failed = []
    for i in range(tests):
        ok = rng.random() > 0.04
        name = f"tests/test_{rng.choice(_WORDS)}.py::test_{_ident(rng)}_{i}"
        lines.append(f"{name} {'PASSED' if ok else 'FAILED'}")
        if not ok:
            failed.append(name)
    for name in failed:
        lines.append(f"_________________________ {name.split('::')[1]} _________________________")
        lines.append(f"    def {name.split('::')[1]}():")
        lines.append(f">       assert {_ident(rng)}() == {rng.randint(0, 999)}")
        lines.append(
            f"E       AssertionError: assert {rng.randint(0, 999)} == {rng.randint(0, 99)}"
        )
    lines.append(
        f"=========== {len(failed)} failed, {tests - len(failed)} passed in "
        f"{rng.uniform(0.5, 90):.2f}s ==========="
    )
    return "\n".join(lines)


def grep_output(rng: random.Random, hits: int) -> str:
    """ripgrep-style hits: path:line:text."""
    return "\n".join(
        f"{rng.choice(_FILES)}:{rng.randint(1, 2000)}:    {_ident(rng)} = "
        f"{_ident(rng)}.get({_ident(rng)!r}, default=None)"
        for _ in range(hits)
    )


def json_answer(rng: random.Random, items: int) -> str:
    """A JSON API answer, pretty-printed as tools print it (non-ASCII kept)."""
    data = {
        "status": "ok",
        "items": [
            {
                "id": rng.randint(10**8, 10**9),
                "name": _ident(rng),
                "title": "".join(rng.choice(_CJK) for _ in range(rng.randint(4, 16)))
                if rng.random() < 0.3
                else " ".join(rng.sample(_WORDS, 5)),
                "tags": rng.sample(_WORDS, 3),
                "score": round(rng.random(), 4),
                "active": rng.random() < 0.5,
            }
            for _ in range(items)
        ],
    }
    return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()


def cjk_log(rng: random.Random, lines: int) -> str:
    """A build log in Chinese with emoji status marks."""
    out = []
    for i in range(lines):
        mark = rng.choice(_EMOJI)
        text = "".join(rng.choice(_CJK) for _ in range(rng.randint(8, 40)))
        out.append(f"[{i:04}] {mark} {text} ({_ident(rng)}: {rng.randint(0, 10**6)})")
    return "\n".join(out)


def _tool_output(rng: random.Random, cache: dict[str, str]) -> tuple[str, dict[str, object], str]:
    kind = rng.random()
    if kind < 0.35:
        path = rng.choice(_FILES)
        if path not in cache or rng.random() < 0.3:
            cache[path] = source_file(rng, rng.choice((20, 60, 150, 400, 1200)))
        return "read_file", {"path": path}, cache[path]
    if kind < 0.55:
        return "run_tests", {"args": ["-x", "tests/"]}, pytest_log(rng, rng.randint(20, 400))
    if kind < 0.72:
        return (
            "grep",
            {"pattern": _ident(rng), "path": "src"},
            grep_output(rng, rng.randint(3, 150)),
        )
    if kind < 0.85:
        return (
            "http_get",
            {"url": f"https://api.example.com/{_ident(rng)}"},
            json_answer(rng, rng.randint(1, 40)),
        )
    if kind < 0.93:
        return "build", {"target": _ident(rng)}, cjk_log(rng, rng.randint(5, 100))
    return "edit_file", {"path": rng.choice(_FILES), "old": _ident(rng), "new": _ident(rng)}, "ok"


class _Writer:
    """Rounds of assistant tool calls and their results, as JSONL lines."""

    def __init__(self, seed: int, first_call: int = 0) -> None:
        self.rng = random.Random(seed)
        self.parts: list[bytes] = []
        self.size = 0
        self.cache: dict[str, str] = {}
        self.calls = first_call

    def emit(self, record: Mapping[str, object]) -> None:
        line = orjson.dumps(record) + b"\n"
        self.parts.append(line)
        self.size += len(line)

    def rounds(self, target_bytes: int) -> None:
        """Tool rounds (every call answered by its result) until ``target_bytes`` are out."""
        rng = self.rng
        while self.size < target_bytes:
            calls = []
            outputs = []
            for _ in range(1 if rng.random() < 0.8 else rng.randint(2, 4)):
                tool, args, output = _tool_output(rng, self.cache)
                call_id = f"call_{self.calls:07d}"
                self.calls += 1
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": orjson.dumps(args).decode()},
                    }
                )
                outputs.append({"role": "tool", "tool_call_id": call_id, "content": output})
            thought = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 60)))
            self.emit({"role": "assistant", "content": thought, "tool_calls": calls})
            for out in outputs:
                self.emit(out)
            if rng.random() < 0.05:
                self.emit(
                    {"role": "user", "content": "Keep going. " + " ".join(rng.sample(_WORDS, 6))}
                )


def generate(target_bytes: int, seed: int = 1) -> bytes:
    """The transcript as JSONL bytes, at least ``target_bytes`` long."""
    out = _Writer(seed)
    out.emit({"role": "system", "content": "You are a careful coding agent. " * 40})
    out.emit({"role": "user", "content": "The cache expiry test fails; find out why and fix it."})
    out.rounds(target_bytes)
    out.emit({"role": "assistant", "content": "Fixed: the expiry used ttl=0. All tests pass. ✅"})
    return b"".join(out.parts)


_CALL_ID = re.compile(rb'"tool_call_id":"call_(\d+)"')


def extend(transcript: bytes, extra_bytes: int, seed: int = 2) -> bytes:
    """Lines that continue ``transcript`` (from :func:`generate`) by ``extra_bytes`` or more.

    ``transcript + extend(transcript, n)`` is one valid session, as an agent's file
    grows: the user asks for more, the assistant runs further tool rounds (call ids
    go on from the transcript's last one, each call answered) and ends with a reply.
    """
    last = transcript.rfind(b'"tool_call_id":"call_')
    found = _CALL_ID.match(transcript, last) if last >= 0 else None
    out = _Writer(seed, int(found.group(1)) + 1 if found else 0)
    out.emit({"role": "user", "content": "Now make the retry test pass as well."})
    out.rounds(extra_bytes)
    out.emit({"role": "assistant", "content": "Done: retries back off now. All tests pass. ✅"})
    return b"".join(out.parts)


def taubench_runs(target_bytes: int, seed: int = 3, run_bytes: int = 512 * 1024) -> bytes:
    """A tau-bench results file of about ``target_bytes``: a JSON array of runs
    ``{task_id, reward, info, traj, trial}`` written with an indent of 2, each ``traj``
    an OpenAI-chat session of about ``run_bytes`` like :func:`generate`'s."""
    runs: list[bytes] = []
    size = task = 0
    while size < target_bytes:
        out = _Writer(seed + task)
        out.emit({"role": "system", "content": "You are an airline support agent. " * 40})
        out.emit({"role": "user", "content": f"Task {task}: change my booking, please."})
        out.rounds(run_bytes)
        out.emit({"role": "assistant", "content": "Your booking is changed. ✅"})
        run = {
            "task_id": task,
            "reward": float(task % 3 != 0),
            "info": {"seed": seed + task},
            "traj": [orjson.loads(line) for line in out.parts],
            "trial": 0,
        }
        item = b"  " + orjson.dumps(run, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n  ")
        runs.append(item)
        size += len(item)
        task += 1
    return b"[\n" + b",\n".join(runs) + b"\n]\n"


_UUID = re.compile(rb"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-)[0-9a-f]{4}([0-9a-f]{8})")
_TOOL_USE_ID = re.compile(rb"(toolu_[0-9A-Za-z]{6})")
# Response ids too: records of one response share it, and a resume merges them, so a
# copy that reused its source's ids would merge responses across copies.
_MESSAGE_ID = re.compile(rb'("id":"msg_[0-9A-Za-z]{6})')


def repeated_session(session: bytes, target_bytes: int) -> bytes:
    """A Claude Code session of ``target_bytes`` or more: ``session`` (a real one) again
    and again, each copy with its own ids (copy ``n`` writes ``n`` in hex into every
    uuid and after every ``toolu_`` and ``msg_`` prefix), so records chain, calls pair
    and responses group only within their copy, as in one long session."""
    copies: list[bytes] = []
    size = 0
    while size < target_bytes:
        tag = b"%04x" % len(copies)
        copy = _UUID.sub(rb"\g<1>" + tag + rb"\g<2>", session)
        copy = _TOOL_USE_ID.sub(rb"\g<1>" + tag, copy)
        copy = _MESSAGE_ID.sub(rb"\g<1>" + tag, copy)
        copies.append(copy)
        size += len(copy)
    return b"".join(copies)


def main(argv: list[str] | None = None) -> int:
    """Write the transcript to the path given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mb", type=float, default=20.0, help="size in MiB (default 20)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    data = generate(int(args.mb * 1024 * 1024), args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"{args.out}: {len(data):,} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
