"""Whole user flows, typed as the README types them: every one gives back the original or refuses.

Issue "Every user flow gives back the original or refuses clearly": each test here failed
on the code before the fix (restore returned the reduced file, refused appended sessions,
collided in ./ctx-offload, or previewed numbers reduce did not write).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from support.cli import invoke
from support.paths import REPO, SAMPLE, SHARED, corpus, need_shared, shared_transcripts

CC = SHARED / "cc_spotter_4d5611e5_subagent_a2898e3.jsonl"
SMALL = '[[stages]]\nuse = "truncate_tool_output"\nmax_length = 300\n'


def _session(tmp_path: Path) -> Path:
    need_shared()
    path = tmp_path / "S.jsonl"
    path.write_bytes(CC.read_bytes())
    return path


def test_twice_reduced_in_place_restores_the_true_original(tmp_path: Path) -> None:
    """README recipe with its own offload dir, then a default in-place run, then restore."""
    session = _session(tmp_path)
    original = session.read_bytes()
    own = tmp_path / "S.offload"
    invoke(
        [
            "reduce",
            str(session),
            "--in-place",
            "--preset",
            "claude-code-resume",
            "--offload-dir",
            str(own),
        ]
    )
    first = session.read_bytes()
    assert first != original
    invoke(["reduce", str(session), "--in-place", "--preset", "reasonblocks"])
    assert session.read_bytes() != first
    result = invoke(["restore", str(session), "-o", "orig.jsonl"])
    assert Path("orig.jsonl").read_bytes() == original
    # It says what it restored, how big, its hash, and from where: both steps.
    digest = hashlib.sha256(original).hexdigest()[:12]
    assert f"restored {len(original):,} bytes (sha256 {digest}) from {own}" in result.stderr
    assert result.stderr.count("restored ") == 2


def test_twice_reduced_with_default_dirs_keeps_both_and_restores(tmp_path: Path) -> None:
    session = _session(tmp_path)
    original = session.read_bytes()
    invoke(["reduce", str(session), "--in-place", "--preset", "claude-code-resume"])
    invoke(["reduce", str(session), "--in-place", "--preset", "reasonblocks"])
    assert (tmp_path / "S.jsonl.offload").is_dir() and (tmp_path / "S.jsonl.offload.2").is_dir()
    invoke(["restore", str(session), "--in-place"])
    assert session.read_bytes() == original


def test_rerun_in_place_that_changes_nothing_writes_nothing(tmp_path: Path) -> None:
    session = _session(tmp_path)
    invoke(["reduce", str(session), "--in-place", "--preset", "claude-code-resume"])
    reduced = session.read_bytes()
    invoke(["reduce", str(session), "--in-place", "--preset", "claude-code-resume"])
    assert session.read_bytes() == reduced
    assert not (tmp_path / "S.jsonl.offload.2").exists()


def _record(i: int) -> bytes:
    return (
        json.dumps(
            {
                "type": "user",
                "uuid": f"appended-{i}",
                "message": {"role": "user", "content": f"appended turn {i}"},
            }
        ).encode()
        + b"\n"
    )


def test_restore_after_the_session_went_on_keeps_the_new_lines(tmp_path: Path) -> None:
    session = _session(tmp_path)
    original = session.read_bytes()
    invoke(["reduce", str(session), "--in-place", "--preset", "claude-code-resume"])
    appended = _record(1) + _record(2)
    with session.open("ab") as fh:
        fh.write(appended)
    result = invoke(["restore", str(session), "-o", "orig.jsonl"])
    assert Path("orig.jsonl").read_bytes() == original + appended
    assert f"{len(appended):,} appended bytes kept" in result.stderr


def test_restore_after_append_and_second_reduction(tmp_path: Path) -> None:
    """Reduce, resume (append), reduce again, resume again: one restore undoes it all."""
    session = _session(tmp_path)
    original = session.read_bytes()
    invoke(["reduce", str(session), "--in-place", "--preset", "claude-code-resume"])
    with session.open("ab") as fh:
        fh.write(_record(1))
    invoke(["reduce", str(session), "--in-place", "--preset", "reasonblocks"])
    with session.open("ab") as fh:
        fh.write(_record(2))
    invoke(["restore", str(session), "--in-place", "-q"])
    assert session.read_bytes() == original + _record(1) + _record(2)


def test_a_change_inside_the_reduced_part_is_refused(tmp_path: Path) -> None:
    session = _session(tmp_path)
    invoke(["reduce", str(session), "--in-place", "--preset", "claude-code-resume"])
    data = bytearray(session.read_bytes())
    data[10] = ord("X") if data[10] != ord("X") else ord("Y")
    session.write_bytes(bytes(data))
    result = invoke(["restore", str(session), "-o", "orig.jsonl"], code=2)
    assert "is not the output this offload directory was made for" in result.stderr
    assert not Path("orig.jsonl").exists()


def test_restore_in_place_keeps_the_file_mode(tmp_path: Path) -> None:
    session = _session(tmp_path)
    original = session.read_bytes()
    session.chmod(0o640)
    invoke(["reduce", str(session), "--in-place"])
    invoke(["restore", str(session), "--in-place"])
    assert session.read_bytes() == original
    assert session.stat().st_mode & 0o777 == 0o640


@pytest.mark.real_data
def test_two_pipes_do_not_collide_and_both_restore(tmp_path: Path) -> None:
    """`cat a | ctx reduce - > out1; cat b | ctx reduce - > out2`: both succeed and restore."""
    a = SAMPLE.read_bytes()
    b = CC.read_bytes()
    cfg = tmp_path / "ctx.toml"
    cfg.write_text(SMALL)
    out1 = invoke(["reduce", "-", "-c", str(cfg)], input=a).stdout_bytes
    out2 = invoke(["reduce", "-", "-c", str(cfg)], input=b).stdout_bytes
    assert out1 != a and out2 != b
    assert len(list(Path("ctx-offload").glob("*/manifest.json"))) == 2
    assert invoke(["restore", "-", "--offload-dir", "ctx-offload"], input=out1).stdout_bytes == a
    assert invoke(["restore", "-", "--offload-dir", "ctx-offload"], input=out2).stdout_bytes == b


def test_restore_finds_a_moved_output_through_the_ledger(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    cfg = tmp_path / "ctx.toml"
    cfg.write_text(SMALL)
    invoke(["reduce", str(src), "-o", "out.jsonl", "-c", str(cfg)])
    Path("out.jsonl").rename("moved.jsonl")
    invoke(["restore", "moved.jsonl", "-o", "back.jsonl"])
    assert Path("back.jsonl").read_bytes() == src.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("path", corpus(shared_transcripts()))
def test_stats_equals_the_file_reduce_writes(path: Path, tmp_path: Path) -> None:
    """Preview equals result: same flags, same numbers, on every real transcript."""
    common = ["--on-invalid", "keep"]
    stats = json.loads(invoke(["stats", str(path), "--json", *common]).stdout)
    piped = invoke(["reduce", str(path), "-q", *common]).stdout_bytes
    assert stats["bytes_after"] == len(piped)
    for flags in (["-o", "out.jsonl"], ["-o", "out2.jsonl", "--offload-dir", "elsewhere"]):
        stats = json.loads(invoke(["stats", str(path), "--json", *common, *flags]).stdout)
        report = json.loads(invoke(["reduce", str(path), "--json", *common, *flags]).stdout)
        assert stats["tokens_after"] == report["tokens_after"], flags
        assert stats["bytes_after"] == report["bytes_after"] == Path(flags[1]).stat().st_size


def test_an_empty_directory_is_refused_by_reduce_stats_and_validate_alike(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (
        ["reduce", str(empty), "-o", "out"],
        ["stats", str(empty)],
        ["validate", str(empty)],
    ):
        result = invoke(args, code=2)
        assert f"{empty}: no transcript files" in result.stderr, args
        assert result.stderr.count("\n") == 1
        # The remedy names the flag (issue 35 §3).
        assert result.stderr.endswith("or pass --allow-empty.\n"), result.stderr
    for args in (
        ["reduce", str(empty), "-o", "out"],
        ["stats", str(empty)],
        ["validate", str(empty)],
    ):
        invoke([*args, "--allow-empty"])


def test_validate_takes_a_directory_like_reduce(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(SAMPLE.read_bytes())
    invoke(["reduce", str(folder / "a.jsonl"), "-o", str(folder / "b.jsonl")])
    result = invoke(["validate", str(folder), "--json"])
    payload = json.loads(result.stdout)
    # The offload directory beside b.jsonl is not taken for transcripts.
    assert [Path(f["input"]).name for f in payload["files"]] == ["a.jsonl", "b.jsonl"]


def test_stats_json_has_one_shape_for_one_file_or_many(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "docs" / "report.schema.json").read_text())
    a = tmp_path / "a.jsonl"
    a.write_bytes(SAMPLE.read_bytes())
    b = tmp_path / "b.jsonl"
    b.write_bytes(SAMPLE.read_bytes())
    one = json.loads(invoke(["stats", str(a), "--json"]).stdout)
    two = json.loads(invoke(["stats", str(a), str(b), "--json"]).stdout)
    reduced = json.loads(invoke(["reduce", str(a), "-o", "r.jsonl", "--json"]).stdout)
    for payload in (one, two, reduced):
        jsonschema.validate(payload, schema)
    # One top-level shape (issue 35): totals, files, failed; a file's report is per file.
    assert set(one) == set(two) == set(reduced) == set(schema["required"])
    assert two["tokens_after"] == 2 * one["tokens_after"]
    assert one["files"][0]["tokens_after"] == one["tokens_after"]
    assert {"format", "messages", "kept_lines", "stages"} <= set(one["files"][0])


def test_a_closed_stdout_ends_quietly_with_the_sigpipe_status(tmp_path: Path) -> None:
    """`ctx reduce big.jsonl | head -1`: no error, no traceback, status 141, nothing left."""
    import subprocess
    import sys

    big = tmp_path / "big.jsonl"
    big.write_bytes(SAMPLE.read_bytes() * 200)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxcli", "reduce", str(big), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 141
    assert err == b""


def test_monitors_table_only_when_one_fires_or_asked(tmp_path: Path) -> None:
    quiet = invoke(["stats", str(SAMPLE)])
    assert "agent monitors" not in quiet.stderr
    asked = invoke(["stats", str(SAMPLE), "--monitors"])
    assert "agent monitors" in asked.stderr
    # The real mini-swe-agent run made 157 tool calls and finished: many calls are no
    # loop, the nudge would not fire, so no table (it showed when calls / 20 reached 0.5).
    busy = invoke(
        ["stats", str(need_shared() / "minisweagent_sqlfluff-1733_deepseek-chat.traj.json")]
    )
    assert "agent monitors" not in busy.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["reduce"],
        ["stats"],
        ["restore"],
        ["validate"],
        ["presets"],
        ["stages"],
        ["init"],
        ["config", "check"],
        ["config", "schema"],
    ],
)
def test_help_shows_no_python_types(command: list[str]) -> None:
    text = invoke([*command, "--help"]).stdout
    for python_type in ("<list[", "<str>", "<int", "<path>", "<file>", "<bool>"):
        assert python_type not in text, (command, python_type)


def test_format_and_preset_list_and_complete_their_choices() -> None:
    import os
    import subprocess
    import sys

    from ctxcli.formats import FORMATS
    from ctxcli.pipeline.presets import preset_names

    text = " ".join(invoke(["reduce", "--help"], input=None).stdout.split())
    text = text.replace("- ", "-")  # a name the help wrapped at its hyphen
    for name in [*FORMATS, *preset_names()]:
        assert name in text
    env = dict(os.environ, _CTX_COMPLETE="complete_bash", COMP_CWORD="3")
    cases = {
        "ctx reduce --format cla": "claude_code",
        "ctx stats --preset claude": "claude-code-resume",
    }
    for words, expected in cases.items():
        out = subprocess.run(
            [str(Path(sys.executable).parent / "ctx")],
            env={**env, "COMP_WORDS": words},
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        assert out.split() == [expected], (words, out)


@pytest.mark.real_data
def test_restore_a_directory_mirrors_reduce(tmp_path: Path) -> None:
    src = tmp_path / "runs"
    (src / "sub").mkdir(parents=True)
    (src / "a.jsonl").write_bytes(SAMPLE.read_bytes())
    (src / "sub" / "b.jsonl").write_bytes(CC.read_bytes())
    cfg = tmp_path / "ctx.toml"
    cfg.write_text(SMALL)
    invoke(["reduce", str(src), "-o", "reduced", "-c", str(cfg)])
    assert Path("reduced/a.jsonl").read_bytes() != SAMPLE.read_bytes()
    result = invoke(["restore", "reduced", "-o", "originals"])
    assert Path("originals/a.jsonl").read_bytes() == SAMPLE.read_bytes()
    assert Path("originals/sub/b.jsonl").read_bytes() == CC.read_bytes()
    assert "2 restored, 0 failed" in result.stderr
    invoke(["restore", "reduced", "--in-place", "-q"])
    assert Path("reduced/sub/b.jsonl").read_bytes() == CC.read_bytes()
