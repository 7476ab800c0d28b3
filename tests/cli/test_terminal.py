"""ctx in a real terminal and in a pipe: colour rules, --version, -h, shell completion."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import invoke
from support.paths import SAMPLE

CTX = Path(sys.executable).parent / "ctx"
ESC = b"\x1b["


def _env(**extra: str) -> dict[str, str]:
    # FORCE_COLOR / TTY_COMPATIBLE would override what these tests check.
    drop = ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "CLICOLOR_FORCE", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(TERM="xterm-256color", COLUMNS="100", **extra)
    return env


def _stderr_on_a_tty(args: list[str], cwd: Path, **env: str) -> tuple[int, bytes]:
    """Run ctx with stderr on a pseudo-terminal; return its exit code and what it drew."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxcli", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=_env(**env),
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks)


@pytest.fixture
def session(tmp_path: Path) -> Path:
    target = tmp_path / "session.jsonl"
    target.write_bytes(SAMPLE.read_bytes())
    return target


def test_terminal_gets_styles_and_no_color_turns_them_off(session: Path) -> None:
    code, styled = _stderr_on_a_tty(["stats", session.name], session.parent)
    assert code == 0
    assert ESC in styled, "a terminal should get a styled table (else the next check is moot)"
    code, plain = _stderr_on_a_tty(["stats", session.name], session.parent, NO_COLOR="1")
    assert code == 0
    assert ESC not in plain
    assert b"truncate_tool_output" in plain and b"total" in plain


def test_errors_on_a_terminal_are_plain(session: Path) -> None:
    code, out = _stderr_on_a_tty(["stats", "missing.jsonl"], session.parent, NO_COLOR="1")
    assert code == 2
    assert out == b"ctx: error: missing.jsonl: no such file\r\n"
    code, out = _stderr_on_a_tty(["reduce", "--no-such-flag"], session.parent, NO_COLOR="1")
    assert code == 2
    # A usage error in ctx's one style, as every other error (never Click's "Usage: ... Error:").
    assert out.startswith(b"ctx: error: no such option: --no-such-flag; see '")
    assert ESC not in out and b"Usage:" not in out and out.count(b"\n") == 1


@pytest.mark.parametrize(
    "args",
    [["stats", "session.jsonl"], ["reduce", "session.jsonl", "-o", "out.jsonl"], ["stages"]],
)
def test_pipes_get_no_escape_sequences(session: Path, args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxcli", *args],
        cwd=session.parent,
        capture_output=True,
        env=_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert ESC not in done.stderr
    assert ESC not in done.stdout


def test_version_and_short_help() -> None:
    from ctxcli._version import __version__

    done = subprocess.run(
        [sys.executable, "-m", "ctxcli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"ctx {__version__}\n", "")
    for args in (["-h"], ["reduce", "-h"], ["config", "-h"], ["config", "check", "-h"]):
        assert "Usage: " in invoke(args).stdout, args


def _complete(words: str, cword: int) -> list[str]:
    env = _env(_CTX_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(cword))
    done = subprocess.run([CTX], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(not CTX.exists(), reason="the ctx console script is not installed")
def test_shell_completion_knows_commands_and_the_config_group() -> None:
    assert _complete("ctx con", 1) == ["config"]
    assert _complete("ctx config ", 2) == ["check", "schema"]
    assert "--fail-over" in _complete("ctx stats --fa", 2)
