"""Object storage for the CLI and the library, against a real S3 server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import invoke
from ctxcli.api.remote import BlobReader, BlobWriter, read_url, reduce_url, restore_url, write_url
from ctxcli.core.errors import OffloadError
from ctxcli.pipeline.config import build_config
from s3_server import S3Server

TIGHT = build_config({"stages": [{"use": "truncate_tool_output", "max_length": 300}]}, "s3")
LONG = "\n".join(f"line {i}: " + "x" * 60 for i in range(1000))


def transcript(n: int = 3) -> bytes:
    lines = [{"role": "user", "content": "go"}]
    for i in range(n):
        lines.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "sh", "arguments": "{}"},
                    }
                ],
            }
        )
        lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"{i} {LONG}"})
    return b"".join(json.dumps(m).encode() + b"\n" for m in lines)


def test_cli_reduces_and_restores_through_s3(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    raw = transcript()
    write_url(f"s3://{bucket}/runs/run.jsonl", raw)
    toml = tmp_path / "ctx.toml"
    toml.write_text('[[stages]]\nuse = "truncate_tool_output"\nmax_length = 300\n')
    result = invoke(
        [
            "reduce",
            "-c",
            str(toml),
            f"s3://{bucket}/runs/run.jsonl",
            "-o",
            f"s3://{bucket}/out/run.jsonl",
            "--offload-dir",
            f"s3://{bucket}/off/run",
            "-q",
        ],
        input="",
    )
    assert result.stdout == ""
    out = read_url(f"s3://{bucket}/out/run.jsonl")
    assert len(out) < len(raw) / 2
    assert f"s3://{bucket}/off/run/trunc/c0" in out.decode()  # the hint names the object
    assert read_url(f"s3://{bucket}/off/run/trunc/c0").decode().startswith("0 line 0")
    invoke(
        [
            "restore",
            f"s3://{bucket}/out/run.jsonl",
            "-o",
            f"s3://{bucket}/back.jsonl",
            "--offload-dir",
            f"s3://{bucket}/off/run",
        ]
    )
    assert read_url(f"s3://{bucket}/back.jsonl") == raw
    # Local output with the default offload next to an s3 input's output works too.
    local = tmp_path / "local.jsonl"
    invoke(["reduce", f"s3://{bucket}/runs/run.jsonl", "-o", str(local), "-q"])
    assert restore_url(str(local), None) == raw


def test_default_offload_sits_next_to_the_output(s3: S3Server) -> None:
    bucket = s3.new_bucket()
    src = f"s3://{bucket}/a.jsonl"
    write_url(src, transcript(1))
    report, out = reduce_url(src, f"s3://{bucket}/b.jsonl", config=TIGHT)
    assert report.offload_dir == f"s3://{bucket}/b.jsonl.offload"
    assert restore_url(f"s3://{bucket}/b.jsonl", None) == transcript(1)
    # Another transcript cannot take over that offload directory.
    write_url(src, transcript(2))
    with pytest.raises(OffloadError, match="holds the offload of another transcript"):
        reduce_url(src, f"s3://{bucket}/b.jsonl", config=TIGHT)
    assert read_url(f"s3://{bucket}/b.jsonl") == out  # the old output is intact


def test_failed_upload_leaves_no_output(s3: S3Server) -> None:
    bucket = s3.new_bucket()
    src = f"s3://{bucket}/a.jsonl"
    write_url(src, transcript(1))
    with pytest.raises(OffloadError):
        reduce_url(
            src, f"s3://{bucket}/b.jsonl", config=TIGHT, offload_dir="s3://no-such-bucket-ctx/off"
        )
    import fsspec

    assert not fsspec.filesystem("s3").exists(f"{bucket}/b.jsonl")


def test_missing_object_is_a_one_line_error(s3: S3Server) -> None:
    bucket = s3.new_bucket()
    result = invoke(["reduce", f"s3://{bucket}/nope.jsonl", "-o", "-"], code=2)
    assert result.stderr.strip() == f"ctx: error: s3://{bucket}/nope.jsonl: no such object"


def test_blobs_are_stored_once_by_hash(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    for root in (f"s3://{bucket}/blobs", str(tmp_path / "blobs")):
        writer = BlobWriter(root)
        from ctxcli.core.protocols import sha256

        blobs = {sha256(b"a"): b"a", sha256(b"b"): b"b"}
        writer.put_many(blobs)
        writer.put_many(blobs)
        assert BlobReader(root)(sha256(b"a")) == b"a"
    assert writer.written == 2  # local: the second put_many found them there
