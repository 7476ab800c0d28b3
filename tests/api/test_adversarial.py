"""What an adversarial run broke (issue 18): each test reproduces one defect.

Data loss in batch mode and with --force, numbers rewritten in records a stage
changed, racing runs, private caches, environment errors reported as bugs, damaged
manifests, aliasing offload directories, crafted ids, kills between the two renames
and offload files that are not UTF-8.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ctxcli.api import Destination, RunOptions, reduce, reduce_file, restore, restore_file
from ctxcli.core.errors import CtxError, OffloadError, RestoreError
from ctxcli.store.history import changes, changes_dir
from ctxcli.store.manifest import MANIFEST
from support.cli import invoke
from support.paths import SAMPLE
from support.session_layout import build as build_layout
from support.transcript_builders import build, to_jsonl, tool_session, write_sessions

TRUNCATE = '[[stages]]\nuse = "truncate_tool_output"\nmax_length = 300\n'


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _ctx(*args: str, plain: bool = False, **kw: Any) -> subprocess.CompletedProcess[bytes]:
    """Run ``ctx`` in a subprocess; ``plain`` drops root's power to ignore permissions."""
    prefix: list[str] = []
    if plain and os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("cannot drop root's file capabilities here: setpriv (util-linux) missing")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]
    if "stdout" not in kw:
        kw["capture_output"] = True
    return subprocess.run([*prefix, sys.executable, "-m", "ctxcli", *args], timeout=120, **kw)


# -- 1. batch mode never overwrites an input -----------------------------------------


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_batch_output_that_is_another_input_is_refused_before_writing(
    tmp_path: Path, jobs: str
) -> None:
    Path("ctx.toml").write_text(TRUNCATE)
    Path("x").mkdir()
    Path("out").mkdir()
    Path("x/a.jsonl").write_bytes(tool_session("first"))
    Path("out/a.jsonl").write_bytes(tool_session("second"))
    before = _tree(Path("out"))
    result = invoke(["reduce", "x/a.jsonl", "out/a.jsonl", "-o", "out", "-j", jobs], code=2)
    assert "out/a.jsonl" in result.stderr and "input" in result.stderr
    assert _tree(Path("out")) == before, "an input was overwritten"


def test_batch_directory_input_that_is_the_output_directory_is_refused(tmp_path: Path) -> None:
    Path("ctx.toml").write_text(TRUNCATE)
    Path("d").mkdir()
    Path("d/a.jsonl").write_bytes(tool_session("a"))
    Path("d/b.jsonl").write_bytes(tool_session("b"))
    before = _tree(Path("d"))
    invoke(["reduce", "d", "-o", "d", "-q"], code=2)
    assert _tree(Path("d")) == before


# -- 2. --force never deletes unrelated files ----------------------------------------


def test_force_does_not_remove_a_directory_holding_the_input(tmp_path: Path) -> None:
    Path("w").mkdir()
    Path("w/in.jsonl").write_bytes(SAMPLE.read_bytes())
    Path("w/other.txt").write_text("precious")
    before = _tree(Path("w"))
    result = invoke(
        ["reduce", "w/in.jsonl", "-o", "w/out.jsonl", "--offload-dir", "w", "--force"], code=2
    )
    assert "w" in result.stderr
    assert _tree(Path("w")) == before


def test_force_does_not_replace_the_input_by_a_directory(tmp_path: Path) -> None:
    Path("in.jsonl").write_bytes(SAMPLE.read_bytes())
    invoke(
        ["reduce", "in.jsonl", "-o", "out.jsonl", "--offload-dir", "in.jsonl", "--force"], code=2
    )
    assert Path("in.jsonl").read_bytes() == SAMPLE.read_bytes()
    assert not Path("out.jsonl").exists()


@pytest.mark.parametrize("where", [".", "~"])
def test_force_refuses_the_working_or_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.setenv("HOME", str(Path.cwd()))
    Path("keep.txt").write_text("precious")
    src = tmp_path / "in.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    target = str(Path.home()) if where == "~" else "."
    with pytest.raises(OffloadError):
        reduce_file(src, tmp_path / "out.jsonl", offload_dir=target, options=RunOptions(force=True))
    assert Path("keep.txt").read_text() == "precious"


def test_force_replaces_only_an_empty_or_ctx_directory(tmp_path: Path) -> None:
    Path("mine").mkdir()
    Path("mine/notes.txt").write_text("precious")
    with pytest.raises(OffloadError, match="not a ctx offload directory"):
        reduce_file(SAMPLE, "out.jsonl", offload_dir="mine", options=RunOptions(force=True))
    assert Path("mine/notes.txt").read_text() == "precious"
    Path("afile").write_text("precious")
    with pytest.raises(OffloadError, match="not a directory"):
        reduce_file(SAMPLE, "out.jsonl", offload_dir="afile", options=RunOptions(force=True))
    assert Path("afile").read_text() == "precious"
    # The offload of another transcript is what --force is for.
    other = tmp_path / "other.jsonl"
    other.write_text('{"role": "user", "content": "other"}\n')
    reduce_file(other, "a.jsonl", offload_dir="off")
    reduce_file(SAMPLE, "b.jsonl", offload_dir="off", options=RunOptions(force=True))
    assert restore_file("b.jsonl", offload_dir="off") == SAMPLE.read_bytes()


# -- 3. numbers the stage did not touch keep their text ------------------------------

NUMBERS = (
    '{"a": 1e400, "e": 1E5, "f": 0.10000000000000001, "g": -1e-400, '
    '"h": 123456789012345678901234567890, "i": -0.0, "j": 1.50}'
)


def _strict(line: bytes) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(line, parse_constant=refuse)


def _with_numbers(fmt: str, compact: bool) -> bytes:
    turns = [
        ("user", "look"),
        ("assistant", None, [("call_1", "grep", {"q": "x", "n": 1})]),
        ("results", [("call_1", "line\n" * 500, False)]),
        ("assistant", "done", []),
    ]
    lines = []
    sep = (",", ":") if compact else (", ", ": ")
    meta = NUMBERS.replace(", ", ",").replace(": ", ":") if compact else NUMBERS
    for record in build(fmt, turns):
        text = json.dumps(record, separators=sep, ensure_ascii=False)
        lines.append('{"meta"' + sep[1] + meta + sep[0] + text[1:])
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("compact", [True, False])
@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic", "langchain", "claude_code", "codex"])
def test_untouched_numbers_keep_their_text(tmp_path: Path, fmt: str, compact: bool) -> None:
    Path("ctx.toml").write_text(TRUNCATE)
    src = tmp_path / "in.jsonl"
    src.write_bytes(_with_numbers(fmt, compact))
    _report, out = reduce_file(src, "out.jsonl")
    assert out != src.read_bytes(), "nothing was reduced: the test proves nothing"
    meta = NUMBERS.replace(", ", ",").replace(": ", ":") if compact else NUMBERS
    for line in out.splitlines():
        _strict(line)
        assert meta in line.decode(), line[:300]
    assert restore_file("out.jsonl") == src.read_bytes()


@pytest.mark.parametrize("indent", [None, 2])
def test_untouched_numbers_keep_their_text_in_json_documents(
    tmp_path: Path, indent: int | None
) -> None:
    Path("ctx.toml").write_text(TRUNCATE)
    turns = [
        ("user", "look"),
        ("assistant", None, [("call_1", "grep", {"q": "x"})]),
        ("results", [("call_1", "line\n" * 500, False)]),
        ("assistant", "done", []),
    ]
    marker = '"meta": "M"'
    records = [{"meta": "M", **r} for r in build("openai_chat", turns)]
    text = json.dumps(records, indent=indent)
    src = tmp_path / "doc.json"
    src.write_text(text.replace(marker, '"meta": ' + NUMBERS))
    _report, out = reduce_file(src, "out.json")
    assert out != src.read_bytes(), "nothing was reduced: the test proves nothing"
    _strict(out)
    assert out.decode().count(NUMBERS) == len(records)
    assert restore_file("out.json") == src.read_bytes()


def test_a_changed_value_beyond_double_range_is_refused_not_written_as_infinity(
    tmp_path: Path,
) -> None:
    # The stage rewrites the arguments object: a number in it cannot be kept as text.
    from ctxcli.formats.jsontext import dumps_like

    with pytest.raises(ValueError, match="JSON"):
        dumps_like({"a": float("inf"), "s": "\ud800"}, b"{}")
    with pytest.raises(ValueError, match="JSON"):
        dumps_like({"a": float("nan")}, b"{}")


# -- 4. racing runs to one output never pair it with another run's offload ----------


def test_parallel_runs_to_one_output_leave_a_restorable_pair(tmp_path: Path) -> None:
    Path("ctx.toml").write_text(TRUNCATE)
    sources = write_sessions(tmp_path, 6, 4000)
    failures: list[BaseException] = []

    def run(src: Path) -> None:
        try:
            reduce_file(src, "out.jsonl", options=RunOptions(force=True))
        except CtxError:
            pass
        except BaseException as exc:  # anything else is a bug
            failures.append(exc)

    for _trial in range(4):
        threads = [threading.Thread(target=run, args=(s,)) for s in sources]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures
        back = restore_file("out.jsonl")
        assert back in [s.read_bytes() for s in sources]


# -- 5. the answer cache is private --------------------------------------------------


def test_cache_directory_and_files_are_private(tmp_path: Path) -> None:
    from ctxcli.services.answer_cache import AnswerCache
    from ctxcli.services.tokens.count_cache import TokenCache

    root = tmp_path / "cache"
    cache = AnswerCache(root)
    cache.put("ns", "k", {"summary": "private"})
    tokens = TokenCache(root / "tokens.sqlite3")
    tokens.put_many("cl100k", [(b"d" * 32, 7)])
    try:
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        files = [p for p in root.iterdir() if p.is_file()]
        assert any(p.name.endswith("-wal") for p in files), files  # checked while open
        for p in files:
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    finally:
        tokens.close()


def test_an_existing_world_readable_cache_is_made_private(tmp_path: Path) -> None:
    from ctxcli.services.answer_cache import AnswerCache

    root = tmp_path / "cache"
    AnswerCache(root).put("ns", "k", 1)
    os.chmod(root, 0o755)
    os.chmod(root / AnswerCache.FILE, 0o644)
    AnswerCache(root).put("ns", "k2", 2)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / AnswerCache.FILE).stat().st_mode) == 0o600


# -- 6. environment errors are exit 2 with one line, not "a bug" --------------------


def _one_line_error(proc: subprocess.CompletedProcess[bytes], *needles: str) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "bug" not in err and "internal error" not in err, err
    assert err.startswith("ctx: error: ") and err.count("\n") == 1, err
    assert "ctx-tmp" not in err, "names a temporary file, not the path the user gave"
    for needle in needles:
        assert needle in err, err


def test_read_only_output_directory_is_exit_2(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    off = tmp_path / "off"
    proc = _ctx(
        "reduce", str(src), "-o", str(ro / "out.jsonl"), "--offload-dir", str(off), plain=True
    )
    _one_line_error(proc, "ro")
    assert not off.exists(), "offload committed without its output"
    proc = _ctx("reduce", str(src), "-o", str(ro / "sub" / "out.jsonl"), plain=True)
    _one_line_error(proc, "ro")
    proc = _ctx("reduce", str(src), "--offload-dir", str(ro / "off"), plain=True)
    _one_line_error(proc, "ro")


def test_unreadable_input_and_in_place_in_read_only_directory_are_exit_2(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "secret.jsonl"
    secret.write_bytes(SAMPLE.read_bytes())
    os.chmod(secret, 0o000)
    for cmd in (["reduce", str(secret)], ["restore", str(secret)], ["stats", str(secret)]):
        _one_line_error(_ctx(*cmd, plain=True), "secret.jsonl")
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "in.jsonl").write_bytes(SAMPLE.read_bytes())
    os.chmod(ro / "in.jsonl", 0o666)
    os.chmod(ro, 0o555)
    proc = _ctx("reduce", str(ro / "in.jsonl"), "--in-place", plain=True)
    _one_line_error(proc, "ro")
    assert (ro / "in.jsonl").read_bytes() == SAMPLE.read_bytes()


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_file_size_limit_is_exit_2(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(tool_session("big", 200_000))
    Path("ctx.toml").write_text('[[stages]]\nuse = "truncate_tool_output"\nmax_length = 200000\n')
    proc = _ctx("reduce", str(src), "-o", "out.jsonl", "-q", preexec_fn=_limit_file_size)
    _one_line_error(proc, "File too large")
    assert not Path("out.jsonl").exists()


def test_full_stdout_is_exit_2_and_commits_no_offload(tmp_path: Path) -> None:
    Path("ctx.toml").write_text(TRUNCATE)
    src = tmp_path / "in.jsonl"
    src.write_bytes(tool_session("x", 5000))
    with open("/dev/full", "wb") as full:
        proc = _ctx("reduce", str(src), "-q", stdout=full, stderr=subprocess.PIPE)
        _one_line_error(proc, "No space left")
        assert not Path("ctx-offload").exists(), "orphan offload committed"
        reduce_file(src, "r.jsonl")
        proc = _ctx("restore", "r.jsonl", stdout=full, stderr=subprocess.PIPE)
        _one_line_error(proc, "No space left")
        proc = _ctx("validate", str(src), "--json", stdout=full, stderr=subprocess.PIPE)
        _one_line_error(proc, "No space left")


def test_closed_stdout_is_exit_2_and_commits_no_offload(tmp_path: Path) -> None:
    Path("ctx.toml").write_text(TRUNCATE)
    src = tmp_path / "in.jsonl"
    src.write_bytes(tool_session("x", 5000))
    proc = subprocess.run(
        f"{sys.executable} -m ctxcli reduce {src} -q >&-",
        shell=True,
        capture_output=False,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    _one_line_error(proc, "stdout")
    assert not Path("ctx-offload").exists()


def test_reader_that_stops_early_gets_no_saved_report_and_no_offload(tmp_path: Path) -> None:
    Path("ctx.toml").write_text('[[stages]]\nuse = "truncate_tool_output"\nmax_length = 900000\n')
    src = tmp_path / "in.jsonl"
    src.write_bytes(tool_session("x", 2_000_000))
    proc = subprocess.run(
        f"{sys.executable} -m ctxcli reduce {src} | head -c 10 >/dev/null; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        stderr=subprocess.PIPE,
        timeout=120,
    )
    assert b"saved" not in proc.stderr and b"error" not in proc.stderr, proc.stderr
    assert proc.returncode == 141
    assert not Path("ctx-offload").exists()


# -- 7. a damaged manifest is a one-line exit 2 --------------------------------------


def _damage(manifest: dict[str, Any], how: str) -> Any:
    if how == "missing key":
        del manifest["output"]
    elif how == "wrong type":
        manifest["script"] = "c"
    elif how == "bad step":
        manifest["script"] = [["x", 1]]
    elif how == "step arity":
        manifest["script"] = [["b", 0]]
    elif how == "files type":
        manifest["files"] = ["a"]
    elif how == "version":
        manifest["version"] = 99
    elif how == "pack outside":
        manifest["pack"]["name"] = "/etc/passwd"
    elif how == "pack dotdot":
        manifest["pack"]["name"] = "../../../etc/passwd"
    elif how == "file outside":
        manifest["files"]["../../x"] = "0" * 64
    elif how == "not an object":
        manifest = [1, 2]
    return manifest


@pytest.mark.parametrize(
    "how",
    [
        "missing key",
        "wrong type",
        "bad step",
        "step arity",
        "files type",
        "version",
        "pack outside",
        "pack dotdot",
        "file outside",
    ],
)
def test_damaged_manifest_is_reported_not_crashed_on(tmp_path: Path, how: str) -> None:
    Path("ctx.toml").write_text(TRUNCATE)
    src = tmp_path / "in.jsonl"
    src.write_bytes(tool_session("x"))
    reduce_file(src, "out.jsonl")
    path = Path("out.jsonl.offload") / MANIFEST
    path.write_bytes(json.dumps(_damage(json.loads(path.read_bytes()), how)).encode())
    result = invoke(["restore", "out.jsonl", "-o", "back.jsonl"], code=2)
    assert f"{path} is damaged" in result.stderr, result.stderr
    assert not Path("back.jsonl").exists()
    with pytest.raises(RestoreError, match="is damaged"):
        restore_file("out.jsonl")


# -- 8. offload directory aliasing the output ----------------------------------------


def test_offload_dir_equal_to_output_is_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    invoke(["reduce", str(SAMPLE), "-o", "out.jsonl", "--offload-dir", "out.jsonl"], code=2)
    assert not Path("out.jsonl").exists()
    Path("w").mkdir()
    invoke(["reduce", str(SAMPLE), "-o", "w/o.jsonl", "--offload-dir", "w/o.jsonl/x"], code=2)
    assert list(Path("w").iterdir()) == []


def test_offload_dir_with_dotdot_works_or_is_refused_cleanly(tmp_path: Path) -> None:
    Path("w").mkdir()
    proc = _ctx("reduce", str(SAMPLE), "-o", "o.jsonl", "--offload-dir", "w/sub/..", "--force")
    assert proc.returncode in (0, 2), proc.stderr
    if proc.returncode == 0:
        assert restore_file("o.jsonl", offload_dir="w") == SAMPLE.read_bytes()


# -- 9. crafted tool ids ---------------------------------------------------------------


def test_crafted_ids_that_collide_with_a_suffixed_name(tmp_path: Path) -> None:
    # keep_rounds = 0: all three results are cleared, so all three texts are offloaded.
    Path("ctx.toml").write_text(
        '[[stages]]\nuse = "clear_tool_results"\nmax_tokens = 0\nkeep_rounds = 0\n'
    )
    texts = ["one " * 300, "two " * 300, "three " * 300]
    crafted = "a-" + hashlib.sha256(texts[2].encode()).hexdigest()[:10]
    ids = ["a", crafted, "a"]
    turns: list[Any] = [("user", "go")]
    for cid, text in zip(ids, texts, strict=True):
        turns.append(("assistant", None, [(cid, "read", {"p": cid})]))
        turns.append(("results", [(cid, text, False)]))
    turns.append(("assistant", "done", []))
    src = tmp_path / "in.jsonl"
    src.write_bytes(to_jsonl(build("openai_chat", turns)))
    _report, out = reduce_file(src, "out.jsonl")
    assert restore_file("out.jsonl") == src.read_bytes()
    off = Path("out.jsonl.offload")
    stored = {p.read_text() for p in off.rglob("*") if p.is_file() and p.parent != off}
    assert set(texts) <= stored


# -- 10. a kill between the two renames leaves a restorable pair --------------------

_KILL_BETWEEN = """
import os, sys
import ctxcli.api as api
from ctxcli.store.disk import OffloadStore

commit = OffloadStore.commit

def commit_then_die(self, *manifest):
    commit(self, *manifest)
    os._exit(9)  # as a SIGKILL right after the offload directory's rename

OffloadStore.commit = commit_then_die
api.reduce_file(sys.argv[1], sys.argv[2])
"""


def test_kill_between_offload_and_output_rename_keeps_the_old_pair(tmp_path: Path) -> None:
    Path("ctx.toml").write_text(TRUNCATE)
    # The same transcript, grown: the run replaces the record of the output it replaces.
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(tool_session("first"))
    second.write_bytes(first.read_bytes() + b'{"role": "user", "content": "more"}\n')
    reduce_file(first, "out.jsonl")
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_BETWEEN, str(second), "out.jsonl"], timeout=60
    )
    assert proc.returncode == 9
    assert restore_file("out.jsonl") == first.read_bytes()
    # The next run finishes the job and sweeps what the killed one left behind.
    reduce_file(second, "out.jsonl")
    assert restore_file("out.jsonl") == second.read_bytes()
    assert sorted(p.name for p in Path.cwd().iterdir()) == [
        "ctx.toml",
        "out.jsonl",
        "out.jsonl.offload",
    ]


def test_stale_output_temp_files_are_swept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    Path(f".out.jsonl.ctx-tmp-{dead}-abcd1234").write_bytes(b"half")
    Path(f".out.jsonl.ctx-tmp-{os.getpid()}-live0000").write_bytes(b"mine")
    reduce_file(SAMPLE, "out.jsonl")
    assert not Path(f".out.jsonl.ctx-tmp-{dead}-abcd1234").exists()
    assert Path(f".out.jsonl.ctx-tmp-{os.getpid()}-live0000").exists()


def test_a_restore_in_place_sweeps_what_a_killed_reduction_left_beside_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run killed while staging its record leaves ".0002-reduce.ctx-tmp-PID-HEX" in the
    # session's change folder; when the next run is a restore (not a reduction), that
    # restore sweeps it (found by the SIGKILL test in CI).
    path = build_layout(tmp_path / "home", monkeypatch).spotter
    original = path.read_bytes()
    reduce(path, Destination(in_place=True))
    assert changes(path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    leftover = changes_dir(path) / f".0002-reduce.ctx-tmp-{dead}-abcd1234"
    leftover.mkdir()
    (leftover / "pack").write_bytes(b"half")
    restore(path, Destination(in_place=True))
    assert path.read_bytes() == original
    assert list(changes_dir(path).glob(".*ctx-tmp*")) == []


# -- 11. offload files are UTF-8 -----------------------------------------------------


def test_lone_surrogate_is_written_as_replacement_character(tmp_path: Path) -> None:
    Path("ctx.toml").write_text(
        '[[stages]]\nuse = "clear_tool_results"\nmax_tokens = 0\nkeep_rounds = 0\n'
    )
    turns = [
        ("user", "go"),
        ("assistant", None, [("c1", "read", {})]),
        ("results", [("c1", "bad \ud800 text " * 100, False)]),
        ("assistant", "done", []),
    ]
    src = tmp_path / "in.jsonl"
    records = build("openai_chat", turns)
    src.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    reduce_file(src, "out.jsonl")
    off = Path("out.jsonl.offload")
    texts = [p for p in off.rglob("*") if p.is_file() and p.parent != off]
    assert texts
    for p in texts:
        text = p.read_bytes().decode("utf-8")  # strict
        assert "\ufffd" in text
    assert restore_file("out.jsonl") == src.read_bytes()


# -- restore -q -------------------------------------------------------------------------


def test_restore_takes_quiet(tmp_path: Path) -> None:
    reduce_file(SAMPLE, "out.jsonl")
    result = invoke(["restore", "out.jsonl", "-o", "back.jsonl", "-q"])
    assert result.stderr == ""
    invoke(["restore", "out.jsonl", "-o", "back2.jsonl", "--quiet"])
    assert Path("back.jsonl").read_bytes() == SAMPLE.read_bytes()
