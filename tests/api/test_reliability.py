"""Crash safety, interrupts, in-place runs and offload-directory hygiene."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxcli.api import RunOptions, reduce_file, restore_file
from ctxcli.core.errors import OffloadError, RestoreError
from ctxcli.store.manifest import MANIFEST, read_manifest
from support.cli import invoke
from support.paths import SAMPLE


def _big_transcript(path: Path, rounds: int) -> None:
    """A transcript large enough that reducing it takes a noticeable moment."""
    block = "\n".join(
        f"src/pkg/mod_{i}.py:{i}: value = compute({i}, retries=3)" for i in range(400)
    )
    with path.open("w") as fh:
        fh.write(json.dumps({"role": "user", "content": "go"}) + "\n")
        for r in range(rounds):
            call = {
                "id": f"call_{r}",
                "type": "function",
                "function": {"name": "grep", "arguments": json.dumps({"q": str(r)})},
            }
            fh.write(
                json.dumps({"role": "assistant", "content": None, "tool_calls": [call]}) + "\n"
            )
            fh.write(
                json.dumps({"role": "tool", "tool_call_id": f"call_{r}", "content": block}) + "\n"
            )


CONFIG = '[[stages]]\nuse = "truncate_tool_output"\nmax_length = 2000\n'


def _ctx(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ctxcli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _complete_or_absent(out: Path, off: Path, original: bytes) -> None:
    """Nothing may exist under a final name unless it is complete."""
    if off.exists():
        manifest = read_manifest(off)
        assert manifest is not None, "offload directory without a manifest"
        for rel in manifest["files"]:
            assert (off / rel).is_file()
    if out.exists():
        assert off.exists(), "output written before its offload directory"
        assert restore_file(out, offload_dir=off) == original


def _wait_for(proc: subprocess.Popen[bytes], ready: Callable[[], bool], what: str) -> bool:
    """Poll until ``ready()``; False if the run ended first (then nothing was interrupted)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if ready():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.001)
    raise AssertionError(f"timed out waiting for {what}")


def _staged_files(n: int) -> Callable[[], bool]:
    """True once a staging offload directory holds at least ``n`` offloaded texts."""

    def ready() -> bool:
        for staging in Path.cwd().glob(".out.jsonl.offload.ctx-tmp-*"):
            if sum(1 for _ in staging.glob("*/*")) >= n:
                return True
        return False

    return ready


def _output_staged() -> bool:
    return any(Path.cwd().glob(".out.jsonl.ctx-tmp-*"))


def _loaded(pid: int, library: str) -> Callable[[], bool]:
    """True once the process has mapped a shared library (it is importing ctx's CLI)."""

    def ready() -> bool:
        try:
            return library in Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            return False

    return ready


# Moments a run can be killed at, each proven by what is on disk when the signal is sent:
# the offload being written (after 1, 50 and 400 texts), and the output being written.
MOMENTS: list[tuple[str, Callable[[], bool]]] = [
    ("first offloaded text written", _staged_files(1)),
    ("50 offloaded texts written", _staged_files(50)),
    ("400 offloaded texts written", _staged_files(400)),
    ("output being written", _output_staged),
]


@pytest.mark.slow
def test_sigkill_mid_write_leaves_nothing_half_written(tmp_path: Path) -> None:
    src = tmp_path / "big.jsonl"
    _big_transcript(src, 1500)
    original = src.read_bytes()
    Path("ctx.toml").write_text(CONFIG)
    out, off = Path("out.jsonl"), Path("out.jsonl.offload")
    killed = 0
    for what, ready in MOMENTS:
        proc = _ctx("reduce", str(src), "-o", str(out), "-q")
        if _wait_for(proc, ready, what):
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.communicate(timeout=60)
        _complete_or_absent(out, off, original)
    assert killed >= 3, "most kills must land while the run is writing"
    # A rerun after any of those kills succeeds and is complete.
    proc = _ctx("reduce", str(src), "-o", str(out), "-q")
    assert proc.communicate(timeout=300)[1] is not None and proc.returncode == 0
    assert restore_file(out) == original
    assert src.read_bytes() == original
    # The rerun cleaned the staging directories the killed runs left behind.
    assert not list(Path.cwd().glob(".out.jsonl.offload.ctx-tmp-*"))


@pytest.mark.slow
def test_ctrl_c_exits_130_and_cleans_up(tmp_path: Path) -> None:
    src = tmp_path / "big.jsonl"
    _big_transcript(src, 1500)
    Path("ctx.toml").write_text(CONFIG)
    interrupted = 0
    moments = [("start-up (importing the CLI)", None), *MOMENTS]
    for what, ready in moments:
        proc = _ctx("reduce", str(src), "-o", "out.jsonl")
        check = ready or _loaded(proc.pid, "_pydantic_core")
        if not _wait_for(proc, check, what):
            proc.communicate(timeout=60)
            continue
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        if proc.returncode == 0:
            continue  # finished between the check and the signal
        assert proc.returncode == 130, (what, err)
        assert b"Traceback" not in err
        assert b"ctx: error: interrupted" in err
        leftovers = [p.name for p in Path.cwd().iterdir() if "ctx-tmp" in p.name]
        assert leftovers == []
        # Interrupted after the output's rename: then it is complete, with its offload.
        _complete_or_absent(Path("out.jsonl"), Path("out.jsonl.offload"), src.read_bytes())
        interrupted += 1
    assert interrupted >= 3, "most interrupts must land while the run is working"


def test_offload_permissions(tmp_path: Path) -> None:
    Path("ctx.toml").write_text(CONFIG.replace("2000", "500"))
    reduce_file(SAMPLE, "out.jsonl")
    off = Path("out.jsonl.offload")
    assert stat.S_IMODE(off.stat().st_mode) == 0o700
    files = [p for p in off.rglob("*") if p.is_file()]
    dirs = [p for p in off.rglob("*") if p.is_dir()]
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in dirs)


def test_refuses_foreign_directory_even_forced(tmp_path: Path) -> None:
    Path("mine").mkdir()
    Path("mine/notes.txt").write_text("precious")
    for force in (False, True):
        with pytest.raises(OffloadError, match="is not a ctx offload directory"):
            reduce_file(SAMPLE, "out.jsonl", offload_dir="mine", options=RunOptions(force=force))
        assert Path("mine/notes.txt").read_text() == "precious"
    assert not (Path("mine") / MANIFEST).exists()


def test_refuses_offload_of_another_transcript(tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text('{"role": "user", "content": "other"}\n')
    reduce_file(other, "a.jsonl", offload_dir="shared-off")
    with pytest.raises(OffloadError, match="holds the offload of another transcript"):
        reduce_file(SAMPLE, "b.jsonl", offload_dir="shared-off")
    # The same transcript may be reduced again into its own directory.
    reduce_file(other, "a.jsonl", offload_dir="shared-off")


def test_restore_detects_missing_and_altered_files(tmp_path: Path) -> None:
    Path("ctx.toml").write_text(CONFIG.replace("2000", "500"))
    reduce_file(SAMPLE, "out.jsonl")
    off = Path("out.jsonl.offload")
    victim = sorted((off / "trunc").iterdir())[0]
    text = victim.read_bytes()
    victim.write_bytes(text + b"x")
    with pytest.raises(RestoreError, match=f"{victim}.*altered"):
        restore_file("out.jsonl")
    victim.unlink()
    with pytest.raises(RestoreError, match=f"{victim}.*missing"):
        restore_file("out.jsonl")
    victim.write_bytes(text)
    pack = off / "originals.bin"
    data = bytearray(pack.read_bytes())
    data[10] ^= 1
    pack.write_bytes(bytes(data))
    with pytest.raises(RestoreError, match="altered"):
        restore_file("out.jsonl")


def test_restore_refuses_edited_output(tmp_path: Path) -> None:
    reduce_file(SAMPLE, "out.jsonl")
    data = Path("out.jsonl").read_bytes()
    # An edit inside the reduced part (lines appended at the end are carried over instead).
    Path("out.jsonl").write_bytes(data[:20] + b"x" + data[21:])
    result = invoke(["restore", "out.jsonl", "-o", "back.jsonl"], code=2)
    assert "is not the output this offload directory was made for" in result.stderr
    assert not Path("back.jsonl").exists()


def test_in_place_keeps_restorable_original(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    os.chmod(src, 0o640)
    invoke(["reduce", str(src), "--in-place", "-q"])
    assert src.stat().st_size < len(SAMPLE.read_bytes())
    assert stat.S_IMODE(src.stat().st_mode) == 0o640
    invoke(["restore", str(src), "-o", "back.jsonl"])
    assert Path("back.jsonl").read_bytes() == SAMPLE.read_bytes()
    # A second in-place run changes nothing and keeps the original restorable.
    reduced = src.read_bytes()
    invoke(["reduce", str(src), "--in-place", "-q"])
    assert src.read_bytes() == reduced
    invoke(["restore", str(src), "-o", "back2.jsonl"])
    assert Path("back2.jsonl").read_bytes() == SAMPLE.read_bytes()


def test_in_place_with_stricter_config_keeps_the_original(tmp_path: Path) -> None:
    """A second, stricter in-place run gets its own offload directory; the first is kept."""
    src = tmp_path / "s.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    Path("ctx.toml").write_text(CONFIG)
    invoke(["reduce", str(src), "--in-place", "-q"])
    reduced = src.read_bytes()
    first = (tmp_path / "s.jsonl.offload" / "manifest.json").read_bytes()
    Path("ctx.toml").write_text('[[stages]]\nuse = "clear_tool_results"\nmax_tokens = 0\n')
    invoke(["reduce", str(src), "--in-place"])
    assert src.read_bytes() != reduced
    assert (tmp_path / "s.jsonl.offload" / "manifest.json").read_bytes() == first
    assert (tmp_path / "s.jsonl.offload.2" / "manifest.json").is_file()
    invoke(["restore", str(src), "-o", "back.jsonl"])
    assert Path("back.jsonl").read_bytes() == SAMPLE.read_bytes()


def test_input_is_never_modified(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    before = (src.read_bytes(), src.stat().st_mtime_ns)
    reduce_file(src, "out.jsonl")
    assert (src.read_bytes(), src.stat().st_mtime_ns) == before
