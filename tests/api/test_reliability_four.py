"""Reliability round four (issue 41): each test replays a way a transcript was lost or a
guarantee broke, and fails on the code before the fix."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from ctxcli.api import Destination, Report, RunOptions, reduce, reduce_file, restore_file
from support.cli import invoke
from support.paths import REPO
from support.transcript_builders import build, to_jsonl, tool_session

SAMPLES = REPO / "sample_transcripts"
CHAIN_A = '[[stages]]\nuse = "truncate_tool_output"\nmax_length = 2000\n'
CHAIN_B = '[[stages]]\nuse = "clear_tool_results"\nmax_tokens = 0\nkeep_rounds = 0\n'


def _rounds(n: int, tag: str = "r") -> bytes:
    """An OpenAI chat transcript of ``n`` tool rounds with long results."""
    lines = [json.dumps({"role": "user", "content": f"go {tag}"})]
    for r in range(n):
        call = {
            "id": f"call_{r}",
            "type": "function",
            "function": {"name": "grep", "arguments": "{}"},
        }
        lines.append(json.dumps({"role": "assistant", "content": None, "tool_calls": [call]}))
        body = "\n".join(f"{tag} src/mod_{r}_{i}.py:{i}: value = {i * r}" for i in range(150))
        lines.append(json.dumps({"role": "tool", "tool_call_id": f"call_{r}", "content": body}))
    return ("\n".join(lines) + "\n").encode()


def _session_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME whose Claude Code keeps sessions under ~/.claude/projects."""
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_DATA_HOME", "CTX_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    project = home / ".claude" / "projects" / "-work-demo"
    project.mkdir(parents=True)
    return project


# -- 1. two stdout reductions of one input ---------------------------------------------


def test_two_stdout_reductions_of_one_input_both_restore(tmp_path: Path) -> None:
    source = Path("s.jsonl")
    source.write_bytes(tool_session("one", size=6000))
    Path("a.toml").write_text(CHAIN_A)
    Path("b.toml").write_text(CHAIN_B)
    Path("a.jsonl").write_bytes(invoke(["reduce", "s.jsonl", "-c", "a.toml"]).stdout_bytes)
    Path("b.jsonl").write_bytes(invoke(["reduce", "s.jsonl", "-c", "b.toml"]).stdout_bytes)
    # The README's pipe idiom, a third chain.
    piped = invoke(["reduce", "-", "--preset", "synaptic"], input=source.read_bytes())
    Path("c.jsonl").write_bytes(piped.stdout_bytes)
    original = source.read_bytes()
    source.unlink()  # the user trusts the reduced files now
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        assert restore_file(name) == original, name


def test_the_same_stdout_reduction_twice_shares_its_directory(tmp_path: Path) -> None:
    Path("s.jsonl").write_bytes(tool_session("one", size=6000))
    Path("ctx.toml").write_text(CHAIN_A)
    first = invoke(["reduce", "s.jsonl"]).stdout_bytes
    assert invoke(["reduce", "s.jsonl"]).stdout_bytes == first
    assert len(list(Path("ctx-offload").iterdir())) == 1


# -- 3. a second in-place run into the same offload directory ---------------------------


def test_second_in_place_run_into_one_offload_dir_keeps_the_first(tmp_path: Path) -> None:
    original = tool_session("one", size=6000)
    Path("in.jsonl").write_bytes(original)
    Path("a.toml").write_text(CHAIN_A)
    Path("b.toml").write_text(CHAIN_B)
    invoke(["reduce", "in.jsonl", "--in-place", "--offload-dir", "D", "-c", "a.toml"])
    done = invoke(["reduce", "in.jsonl", "--in-place", "--offload-dir", "D", "-c", "b.toml"])
    assert "D holds this file's earlier reduction" in done.stderr
    assert Path("D.2/manifest.json").is_file()
    invoke(["restore", "in.jsonl", "--in-place"])
    assert Path("in.jsonl").read_bytes() == original


def test_a_scheduled_forced_in_place_run_loses_no_earlier_run(tmp_path: Path) -> None:
    lines = _rounds(8).splitlines(keepends=True)
    log = Path("LOG.jsonl")
    log.write_bytes(b"".join(lines[:5]))
    Path("ctx.toml").write_text(CHAIN_A)
    for n in range(6, len(lines) + 1, 2):  # the log grows between runs
        invoke(["reduce", "LOG.jsonl", "--in-place", "--offload-dir", "DIR", "--force"])
        log.write_bytes(log.read_bytes() + b"".join(lines[n - 1 : n + 1]))
    invoke(["restore", "LOG.jsonl", "--in-place"])
    assert log.read_bytes() == b"".join(lines)


def test_force_never_replaces_another_transcripts_record(tmp_path: Path) -> None:
    Path("ctx.toml").write_text(CHAIN_A)
    Path("a.jsonl").write_bytes(tool_session("aaa", size=6000))
    Path("b.jsonl").write_bytes(tool_session("bbb", size=6000))
    reduce_file("a.jsonl", "ra.jsonl", offload_dir="D")
    refused = invoke(["reduce", "b.jsonl", "-o", "rb.jsonl", "--offload-dir", "D"], code=2)
    assert "D holds the offload of another transcript" in refused.stderr
    invoke(["reduce", "b.jsonl", "-o", "rb.jsonl", "--offload-dir", "D", "--force"])
    assert restore_file("ra.jsonl") == Path("a.jsonl").read_bytes()
    assert restore_file("rb.jsonl") == Path("b.jsonl").read_bytes()


def test_one_input_into_two_outputs_with_one_offload_dir(tmp_path: Path) -> None:
    Path("a.toml").write_text(CHAIN_A)
    Path("b.toml").write_text(CHAIN_B)
    Path("s.jsonl").write_bytes(tool_session("one", size=6000))
    invoke(["reduce", "s.jsonl", "-o", "x.jsonl", "--offload-dir", "D", "-c", "a.toml"])
    invoke(["reduce", "s.jsonl", "-o", "y.jsonl", "--offload-dir", "D", "-c", "b.toml"])
    assert restore_file("x.jsonl") == Path("s.jsonl").read_bytes()
    assert restore_file("y.jsonl") == Path("s.jsonl").read_bytes()


# -- the offload_dir setting, in place too ----------------------------------------------


def test_the_offload_dir_setting_is_honoured_in_place(tmp_path: Path) -> None:
    Path("ctx.toml").write_text('offload_dir = "cfgdir"\n' + CHAIN_A)
    Path("b.jsonl").write_bytes(tool_session("one", size=6000))
    predicted = json.loads(invoke(["stats", "b.jsonl", "--in-place", "--json"]).stdout)
    done = reduce("b.jsonl", Destination(in_place=True))
    assert done.change is not None and done.change.record == Path("cfgdir")
    assert predicted["files"][0]["offload_dir"] == os.path.abspath("cfgdir")


# -- 5. --offload-dir and the in-use check -----------------------------------------------


def test_offload_dir_does_not_switch_off_the_in_use_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _session_home(tmp_path / "home", monkeypatch)
    session = project / "5b0e3c6a-8f2d-4c1e-9a7b-3d4f5e6a7b8c.jsonl"
    session.write_bytes((SAMPLES / "claude_code_session.jsonl").read_bytes())  # written now
    before = session.read_bytes()
    out = invoke(["reduce", str(session), "--in-place", "--offload-dir", "D"], code=2)
    assert "looks in use" in out.stderr
    assert session.read_bytes() == before


# -- 6. a one-line JSON document with bytes after it -------------------------------------


def test_a_document_with_trailing_bytes_is_not_made_unrestorable(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "hi"}]
    for i in range(4):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 6000})
    original = (json.dumps({"messages": messages}) + '\n{"x"').encode()
    Path("ctx.toml").write_text(CHAIN_A)
    Path("d.json").write_bytes(original)
    into_file = invoke(["reduce", "d.json", "-o", "out.json"], code=2)
    in_place = invoke(["reduce", "d.json", "--in-place"], code=2)
    # Either way it is the same transcript and the same refusal; the file is untouched.
    assert in_place.stderr.split(":", 2)[2] == into_file.stderr.split(":", 2)[2]
    assert Path("d.json").read_bytes() == original


# -- 8. a file that shrinks is worth writing, even when a resume sends the same ----------


def _compacted_session() -> bytes:
    """A Claude Code session compacted once: big tool outputs before the boundary (a
    resume does not send them), one short one after it."""
    big = [("user", "look around")]
    for i in range(3):
        big.append(("assistant", None, [(f"toolu_b{i}", "Bash", {"command": "cat log"})]))
        big.append(("tool", [(f"toolu_b{i}", f"line {i}\n" * 4000, False)]))
    small = [
        ("user", "and now?"),
        ("assistant", None, [("toolu_s", "Bash", {"command": "pwd"})]),
        ("tool", [("toolu_s", "/home/u/p", False)]),
        ("assistant", "done", []),
    ]
    before = build("claude_code", big)
    after = build("claude_code", small)
    for record in after:
        record["uuid"] = "a-" + record["uuid"]
        if record["parentUuid"] is not None:
            record["parentUuid"] = "a-" + record["parentUuid"]
    boundary = {
        **{k: v for k, v in after[0].items() if k not in ("message", "toolUseResult")},
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
        "uuid": "boundary",
        "parentUuid": None,
        "logicalParentUuid": before[-1]["uuid"],
        "compactMetadata": {"trigger": "manual", "preTokens": 40000},
    }
    after[0]["parentUuid"] = "boundary"
    return to_jsonl([*before, boundary, *after])


def _report(tokens: tuple[int, int], size: tuple[int, int]) -> Report:
    return Report(
        input="s.jsonl",
        format="claude_code",
        tokenizer="cl100k",
        messages=10,
        tokens_before=tokens[0] * 10,
        tokens_after=tokens[1] * 10,
        bytes_before=size[0],
        bytes_after=size[1],
        stages=[],
        resume_tokens_before=tokens[0],
        resume_tokens_after=tokens[1],
    )


def test_in_place_counts_a_smaller_file_as_a_gain() -> None:
    from ctxcli.api.commit import gain

    # The session of the issue: 3.2 MB, 95% smaller, a resume sends 2,443 -> 2,519.
    grew_small = gain(_report((2443, 2519), (3_200_000, 160_000)))
    assert grew_small.worth and grew_small.size and not grew_small.tokens
    # A resume that sends more and a file that barely shrinks: nothing worth writing.
    assert not gain(_report((2443, 2519), (3_200_000, 3_000_000))).worth
    assert gain(_report((2443, 2000), (3_200_000, 3_100_000))).tokens


def test_a_compacted_session_is_written_for_its_size(tmp_path: Path) -> None:
    Path("s.jsonl").write_bytes(_compacted_session())
    Path("ctx.toml").write_text(CHAIN_B)
    stats = json.loads(invoke(["stats", "s.jsonl", "--in-place", "--json"]).stdout)["files"][0]
    # What a resume sends is after the boundary; the file is mostly before it.
    assert stats["resume_tokens_after"] == stats["resume_tokens_before"]
    assert stats["bytes_after"] * 4 < stats["bytes_before"]
    invoke(["reduce", "s.jsonl", "--in-place"])
    assert Path("s.jsonl").stat().st_size == stats["bytes_after"]
    invoke(["restore", "s.jsonl", "--in-place"])
    assert Path("s.jsonl").read_bytes() == _compacted_session()


# -- 10. the client's sessions index keeps its mode --------------------------------------


def test_sessions_index_keeps_its_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = _session_home(tmp_path / "home", monkeypatch)
    sid = "5b0e3c6a-8f2d-4c1e-9a7b-3d4f5e6a7b8c"
    session = project / f"{sid}.jsonl"
    session.write_bytes((SAMPLES / "claude_code_session.jsonl").read_bytes())
    index = project / "sessions-index.json"
    entry = {"sessionId": sid, "fullPath": str(session), "fileMtime": 0, "messageCount": 0}
    index.write_text(json.dumps({"version": 1, "entries": [entry]}))
    index.chmod(0o600)
    os.utime(session, (1, 1))  # long quiet
    Path("ctx.toml").write_text(CHAIN_B)
    reduce(str(session), Destination(in_place=True), options=RunOptions(force=True))
    assert json.loads(index.read_text())["entries"][0]["fileMtime"] > 0
    assert stat.S_IMODE(index.stat().st_mode) == 0o600


# -- 17. -o names an existing directory ---------------------------------------------------


def test_output_that_is_a_directory_is_refused_naming_it(tmp_path: Path) -> None:
    Path("f.jsonl").write_bytes(tool_session("one", size=6000))
    Path("od").mkdir()
    out = invoke(["reduce", "f.jsonl", "-o", "od"], code=2)
    assert "od is a directory" in out.stderr
    assert "ctx-tmp" not in out.stderr
    assert sorted(p.name for p in Path.cwd().iterdir()) == ["f.jsonl", "od"]
    assert list(Path("od").iterdir()) == []


# -- 2. batch restore checks its whole plan first -------------------------------------------


def test_batch_restore_never_writes_over_a_later_input(tmp_path: Path) -> None:
    Path("ctx.toml").write_text(CHAIN_A)
    one, two = _rounds(3, "one"), _rounds(3, "two")
    Path("s1.jsonl").write_bytes(one)
    Path("s2.jsonl").write_bytes(two)
    Path("a").mkdir()
    Path("out").mkdir()
    reduce_file("s1.jsonl", "a/r.jsonl")
    reduce_file("s2.jsonl", "out/r.jsonl")
    reduced = Path("out/r.jsonl").read_bytes()
    for name in ("s1.jsonl", "s2.jsonl"):
        Path(name).unlink()
    refused = invoke(["restore", "a/r.jsonl", "out/r.jsonl", "-o", "out"], code=2)
    assert "would overwrite the input out/r.jsonl" in refused.stderr
    assert Path("out/r.jsonl").read_bytes() == reduced
    assert restore_file("out/r.jsonl") == two
    assert restore_file("a/r.jsonl") == one


# -- 4. a restore that stops before the original -------------------------------------------


def _appended_line(session: Path, n: int) -> bytes:
    """A line as Claude Code appends it: a user message after the last record."""
    last = json.loads(session.read_bytes().splitlines()[-1])
    record = {
        "parentUuid": last.get("uuid"),
        "isSidechain": False,
        "type": "user",
        "uuid": f"appended-{n}",
        "sessionId": last.get("sessionId"),
        "message": {"role": "user", "content": f"one more thing ({n})"},
    }
    return json.dumps(record).encode() + b"\n"


def _quiet(path: Path) -> None:
    os.utime(path, (1, 1))  # its client has long left it


def test_a_moved_session_grown_and_reduced_again_restores_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _session_home(tmp_path / "home", monkeypatch)
    Path("ctx.toml").write_text(CHAIN_B)
    session = project / "5b0e3c6a-8f2d-4c1e-9a7b-3d4f5e6a7b8c.jsonl"
    original = (SAMPLES / "claude_code_session.jsonl").read_bytes()
    session.write_bytes(original)
    _quiet(session)
    invoke(["reduce", str(session), "--in-place"])
    moved = project.parent / "-work-renamed" / session.name  # the project was renamed
    moved.parent.mkdir()
    session.rename(moved)
    extra = _appended_line(moved, 1)
    moved.write_bytes(moved.read_bytes() + extra)
    _quiet(moved)
    Path("ctx.toml").write_text(CHAIN_A)
    invoke(["reduce", str(moved), "--in-place"])
    invoke(["restore", str(moved), "--in-place"])
    assert moved.read_bytes() == original + extra
    # Nothing of the first change is left behind: its path no longer exists.
    assert not any((tmp_path / "home").rglob("0001-reduce"))


def test_a_missing_change_in_the_middle_fails_the_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _session_home(tmp_path / "home", monkeypatch)
    session = project / "5b0e3c6a-8f2d-4c1e-9a7b-3d4f5e6a7b8c.jsonl"
    session.write_bytes((SAMPLES / "claude_code_session.jsonl").read_bytes())
    chains = [CHAIN_A.replace("2000", "8000"), CHAIN_A, CHAIN_B]
    for n, chain in enumerate(chains):
        Path("ctx.toml").write_text(chain)
        _quiet(session)
        invoke(["reduce", str(session), "--in-place"])
        session.write_bytes(session.read_bytes() + _appended_line(session, n))
    records = sorted((tmp_path / "home").rglob("000?-reduce"))
    assert len(records) == 3
    shutil.rmtree(records[1])
    before = session.read_bytes()
    _quiet(session)
    failed = invoke(["restore", str(session), "--in-place"], code=2)
    assert "stops before the original" in failed.stderr
    assert session.read_bytes() == before
    assert records[0].is_dir() and records[2].is_dir()  # nothing discarded


# -- small things ------------------------------------------------------------------------


def test_reduce_to_a_terminal_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    import pty
    import subprocess
    import sys

    Path("s.jsonl").write_bytes(_rounds(2))
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ctxcli", "reduce", "s.jsonl"],
            stdout=follower,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 2
    assert b"pass -o FILE" in proc.stderr
    assert not Path("ctx-offload").exists()


def test_restore_in_place_of_a_plain_file_leaves_no_record_behind(tmp_path: Path) -> None:
    original = _rounds(4)
    Path("f.jsonl").write_bytes(original)
    Path("ctx.toml").write_text(CHAIN_A)
    invoke(["reduce", "f.jsonl", "--in-place"])
    Path("ctx.toml").write_text(CHAIN_B)
    invoke(["reduce", "f.jsonl", "--in-place"])
    assert Path("f.jsonl.offload.2").is_dir()
    invoke(["restore", "f.jsonl", "--in-place"])
    assert Path("f.jsonl").read_bytes() == original
    assert sorted(p.name for p in Path.cwd().iterdir()) == ["ctx.toml", "f.jsonl"]


def test_a_stdout_record_of_another_output_is_kept_and_stdout_written_once(
    tmp_path: Path,
) -> None:
    """A chain that does not give the same output twice (a model's summary, a newer ctx):
    the earlier output's record stays, the new one goes beside it, stdout gets one copy."""
    Path("s.jsonl").write_bytes(_rounds(3))
    Path("ctx.toml").write_text(CHAIN_A)
    first = invoke(["reduce", "s.jsonl"]).stdout_bytes
    (record,) = Path("ctx-offload").iterdir()
    manifest = json.loads((record / "manifest.json").read_bytes())
    manifest["output"]["sha256"] = "0" * 64  # as if that run had written another output
    (record / "manifest.json").write_text(json.dumps(manifest))
    second = invoke(["reduce", "s.jsonl"])
    assert second.stdout_bytes.count(b'"role": "user"') == first.count(b'"role": "user"')
    Path("b.jsonl").write_bytes(second.stdout_bytes)
    assert restore_file("b.jsonl") == _rounds(3)
    assert (record.parent / f"{record.name}.2" / "manifest.json").is_file()
