"""SIGKILL `ctx reduce --session ID --in-place` at random moments: nothing is ever lost.

After every kill the session file must still be one the client can read (every line
JSON, ending in a newline) and the recorded layers must give the original back. The
rounds run one after another on the same session, so killed runs, finished runs and
stacked layers all meet. CTX_KILL_ROUNDS and CTX_KILL_SEED change the rounds and seed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from ctxcli.api import Destination, RunOptions, restore, restore_file
from ctxcli.store.history import changes, changes_dir
from support.session_layout import Layout, build

pytestmark = pytest.mark.slow


def _readable(data: bytes) -> None:
    assert data.endswith(b"\n")
    for line in data.splitlines():
        orjson.loads(line)


def _run(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ctxcli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_random_kills_never_lose_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout: Layout = build(tmp_path / "home", monkeypatch)
    path = layout.spotter
    original = path.read_bytes()
    rng = random.Random(int(os.environ.get("CTX_KILL_SEED", "17")))
    rounds = int(os.environ.get("CTX_KILL_ROUNDS", "8"))
    # One uninterrupted run tells how long a run takes on this machine.
    start = time.monotonic()
    first = subprocess.run(
        [sys.executable, "-m", "ctxcli", "reduce", "--session", "4d56", "--in-place", "--force"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    span = time.monotonic() - start
    assert restore_file(path) == original
    killed = 0
    for n in range(rounds):
        preset = ["--preset", "claude-code-resume"] if n % 2 else []
        proc = _run(["reduce", "--session", "4d56", "--in-place", "--force", "-q", *preset])
        time.sleep(rng.uniform(0.05, span * 1.1))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait(timeout=120)
        data = path.read_bytes()
        _readable(data)
        if changes(path):
            assert restore_file(path) == original, f"round {n}"
        else:
            assert data == original
    assert killed, "no run was killed: the machine is too fast for these delays"
    restore(path, Destination(in_place=True), options=RunOptions(force=True))
    assert path.read_bytes() == original
    # Temporary files of killed runs are swept by the next run.
    assert [p.name for p in path.parent.iterdir() if ".ctx-tmp-" in p.name] == []
    assert [p.name for p in changes_dir(path).parent.rglob(".*ctx-tmp*")] == []
