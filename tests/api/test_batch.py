"""Several files or a directory at once: per-file failures, --jobs, unchanged single-file use."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ctxcli.api import batch
from ctxcli.pipeline.config import load_config
from support.cli import invoke
from support.paths import SAMPLE


def _session(n: int, tag: str) -> bytes:
    lines: list[dict[str, object]] = [{"role": "user", "content": f"task {tag}"}]
    for i in range(n):
        lines.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"{tag}{i}",
                        "type": "function",
                        "function": {"name": "grep", "arguments": '{"pattern": "ttl"}'},
                    }
                ],
            }
        )
        body = "\n".join(f"src/{tag}/m{i}.py:{j}: ttl = {j}" for j in range(2000))
        lines.append({"role": "tool", "tool_call_id": f"{tag}{i}", "content": body})
    lines.append({"role": "assistant", "content": "done"})
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    """A directory of transcripts: three good ones, one broken, one that is not a transcript."""
    root = tmp_path / "sessions"
    (root / "nested").mkdir(parents=True)
    (root / "a.jsonl").write_bytes(_session(6, "a"))
    (root / "b.jsonl").write_bytes(SAMPLE.read_bytes())
    (root / "nested" / "c.jsonl").write_bytes(_session(3, "c"))
    (root / "broken.jsonl").write_bytes(b'{"role": "user", "content": "hi"}\n{"role": \n')
    (root / "notes.md").write_text("not a transcript\n")
    return root


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_directory_reduce_reports_the_bad_file_and_does_the_rest(
    sessions: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = invoke(["reduce", str(sessions), "-o", str(out)], code=2)
    assert result.stdout == ""
    assert "broken.jsonl:2: not valid JSON" in result.stderr
    assert "3 reduced, 1 failed" in result.stderr
    for name in ("a.jsonl", "b.jsonl", "nested/c.jsonl"):
        assert (out / name).is_file()
        assert (out / f"{name}.offload" / "manifest.json").is_file()
        restored = invoke(["restore", str(out / name)])
        assert restored.stdout_bytes == (sessions / name).read_bytes()
    assert not (out / "broken.jsonl").exists()
    assert not (out / "notes.md").exists()


def test_jobs_2_writes_the_same_as_jobs_1(sessions: Path) -> None:
    # Same output directory name both times: the hints cite it.
    one = invoke(["reduce", str(sessions), "-o", "out", "--json"], code=2)
    Path("out").rename("one")
    two = invoke(["reduce", str(sessions), "-o", "out", "-j", "2", "--json"], code=2)
    assert _tree(Path("one")) == _tree(Path("out"))
    assert orjson.loads(one.stdout) == orjson.loads(two.stdout)


def test_several_files_keep_input_order_in_json(sessions: Path, tmp_path: Path) -> None:
    files = [str(sessions / "b.jsonl"), str(sessions / "broken.jsonl"), str(sessions / "a.jsonl")]
    result = invoke(["stats", *files, "--json", "-j", "2"], code=2)
    payload = orjson.loads(result.stdout)
    assert [f["input"] for f in payload["files"]] == files
    assert payload["failed"] == 1
    assert payload["files"][1]["exit_code"] == 2
    assert payload["files"][0]["tokens_before"] > payload["files"][0]["tokens_after"]


def test_stats_table_for_a_directory(sessions: Path) -> None:
    (sessions / "broken.jsonl").unlink()
    result = invoke(["stats", str(sessions)])
    assert result.stdout == ""
    assert "3 transcripts" in result.stderr
    assert "nested/c.jsonl" in result.stderr.replace("\n", "")


def test_several_inputs_need_an_output_directory(sessions: Path, tmp_path: Path) -> None:
    result = invoke(["reduce", str(sessions)], code=2)
    assert "-o must name a directory" in result.stderr
    (tmp_path / "file").write_text("x")
    result = invoke(["reduce", str(sessions), "-o", str(tmp_path / "file")], code=2)
    assert "is a file; with several inputs, -o must name a directory" in result.stderr


def test_stdin_cannot_join_other_inputs(sessions: Path, tmp_path: Path) -> None:
    result = invoke(["stats", "-", str(sessions / "a.jsonl")], code=2, input=b"")
    assert "stdin" in result.stderr


def test_same_name_from_two_places_is_refused_not_overwritten(tmp_path: Path) -> None:
    for d in ("x", "y"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "s.jsonl").write_bytes(SAMPLE.read_bytes())
    config = load_config()
    results = batch.reduce_many(
        [tmp_path / "x" / "s.jsonl", tmp_path / "y" / "s.jsonl"], tmp_path / "out", config
    )
    assert [r.ok for r in results] == [True, False]
    assert "separate runs" in (results[1].error or "")
    assert batch.exit_code(results) == 2


def test_missing_input_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke(["stats", str(tmp_path / "nope.jsonl"), str(SAMPLE)], code=2)
    assert "nope.jsonl" in result.stderr


def test_single_file_use_is_unchanged(tmp_path: Path) -> None:
    piped = invoke(["reduce", "-", "-o", "-", "-q"], input=SAMPLE.read_bytes())
    # Both write to stdout, so both use the same per-input directory under ./ctx-offload.
    direct = invoke(["reduce", str(SAMPLE), "-q"])
    assert piped.stdout_bytes == direct.stdout_bytes
    report = orjson.loads(invoke(["stats", str(SAMPLE), "--json", "-j", "2"]).stdout)
    assert report["files"][0]["input"] == str(SAMPLE)
