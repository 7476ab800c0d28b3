"""Object storage for the CLI and the library, against a real S3 server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxcli import api
from ctxcli.api.remote import BlobReader, BlobWriter, read_url, restore_url, write_url
from ctxcli.core.errors import OffloadError
from ctxcli.pipeline.config import Config, build_config
from support.cli import invoke
from support.paths import SAMPLE
from support.s3_server import S3Server

TIGHT = build_config({"stages": [{"use": "truncate_tool_output", "max_chars": 300}]}, "s3")
LONG = "\n".join(f"line {i}: " + "x" * 60 for i in range(1000))


def reduce_url(
    source: str, output: str, *, config: Config, offload_dir: str | None = None
) -> tuple[api.Report, bytes]:
    """The front door with URLs: it picks the object-storage route."""
    done = api.reduce(source, api.Destination(output, offload_dir), config=config)
    return done.report, done.output


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


@pytest.mark.parametrize("which", ["input", "output"])
def test_a_file_url_cannot_overwrite_its_input(which: str, tmp_path: Path) -> None:
    # Issue 34 item 6: the alias check compared the URL with the path, and lost the input.
    src = tmp_path / "in.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    given = f"file://{src}" if which == "input" else str(src)
    out = str(src) if which == "input" else f"file://{src}"
    result = invoke(["reduce", given, "-o", out], code=2)
    assert result.stderr.startswith(f"ctx: error: {src}: output would overwrite the input")
    assert src.read_bytes() == SAMPLE.read_bytes()
    assert not (tmp_path / "in.jsonl.offload").exists()


def test_file_urls_are_local_paths(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    out = tmp_path / "out.jsonl"
    invoke(["reduce", f"file://{src}", "-o", f"file://{out}", "-q"])
    assert len(out.read_bytes()) < len(SAMPLE.read_bytes()) / 4
    assert f"{out}.offload/trunc/" in out.read_text()  # hints cite the local directory
    back = tmp_path / "back.jsonl"
    invoke(
        [
            "restore",
            f"file://{out}",
            "-o",
            f"file://{back}",
            "--offload-dir",
            f"file://{out}.offload",
        ]
    )
    assert back.read_bytes() == SAMPLE.read_bytes()
    report, _ = reduce_url(f"file://{src}", f"file://{tmp_path}/lib.jsonl", config=TIGHT)
    assert report.offload_dir == f"{tmp_path}/lib.jsonl.offload"
    assert restore_url(f"file://{tmp_path}/lib.jsonl", None) == SAMPLE.read_bytes()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends


@pytest.fixture
def fresh_s3fs() -> Iterator[None]:
    """No S3 filesystem cached by an earlier test: this test's environment is read anew."""
    s3fs = pytest.importorskip("s3fs", reason="s3fs is not installed (pip install -e '.[s3]')")
    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def endpoint_down(monkeypatch: pytest.MonkeyPatch, fresh_s3fs: None) -> str:
    """Credentials, and an endpoint on a loopback port nothing listens on (one attempt)."""
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    return endpoint


def test_no_credentials_is_a_user_error(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch, fresh_s3fs: None
) -> None:
    # Issue 34 item 10: botocore's NoCredentialsError was reported as a bug in ctx (123).
    bucket = s3.new_bucket()
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    result = invoke(["reduce", f"s3://{bucket}/in.jsonl", "-o", "-"], code=2)
    assert result.stderr == (
        f"ctx: error: s3://{bucket}/in.jsonl: cannot read (Unable to locate credentials)\n"
    )


def test_endpoint_down_on_write_is_a_user_error(endpoint_down: str, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    result = invoke(["reduce", str(src), "-o", "s3://bucket/out.jsonl"], code=2)
    assert result.stderr.startswith("ctx: error: s3://bucket/out.jsonl.offload: cannot read (")
    assert "Could not connect to the endpoint URL" in result.stderr
    assert result.stderr.count("\n") == 1


def test_endpoint_down_on_restore_is_a_user_error(endpoint_down: str, tmp_path: Path) -> None:
    result = invoke(["restore", "s3://bucket/out.jsonl", "-o", str(tmp_path / "back")], code=2)
    assert result.stderr.startswith("ctx: error: s3://bucket/out.jsonl: cannot read (")
    assert "Could not connect to the endpoint URL" in result.stderr
    assert not (tmp_path / "back").exists()
