"""One front door for run options (issue 40 item 3): ``reduce``, ``stats``, ``restore``,
``Destination`` and ``RunOptions`` from ``ctxcli``; every older route gives what it gives.

Each old route has a test that it returns what the front door returns for the same call;
the deprecated ones also warn. ``on_invalid`` has one default per command, stated once
(``ctxcli.core.errors``), and is an ``OnInvalid`` in every library signature.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import ctxcli
from ctxcli import api
from ctxcli.core.errors import DEFAULT_ON_INVALID, VALIDATE_ON_INVALID, OnInvalid
from ctxcli.pipeline.config import build_config
from support.paths import REPO
from support.transcript_builders import tool_session

SRC = REPO / "src" / "ctxcli"
CHAIN = build_config({"stages": [{"use": "truncate_tool_output", "max_chars": 800}]}, "chain")


def _offload(root: Path) -> dict[str, bytes]:
    """An offload directory's files (manifest included) by their relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _session(name: str = "s.jsonl") -> Path:
    path = Path(name)
    path.write_bytes(tool_session("front door", size=6000))
    return path


def test_the_front_door_is_exported_from_ctxcli() -> None:
    for name in ("reduce", "stats", "restore", "Destination", "RunOptions"):
        assert name in ctxcli.__all__, name
        assert getattr(ctxcli, name) is getattr(api, name), name
    from ctxcli.pipeline.compose import reduce_bytes
    from ctxcli.pipeline.options import RunOptions

    # One options object: the pipeline takes the one the front door takes.
    assert ctxcli.RunOptions is RunOptions
    assert reduce_bytes.__annotations__["options"] == "RunOptions | None"
    for gone in ("ReduceOptions", "reduce_records", "ReducedRecords"):
        assert gone not in ctxcli.__all__, gone


def test_reduce_options_is_a_deprecated_name_of_run_options() -> None:
    with pytest.warns(DeprecationWarning, match="ctxcli.ReduceOptions is deprecated"):
        old = ctxcli.ReduceOptions  # type: ignore[attr-defined]
    assert old is ctxcli.RunOptions


def _set_aside(name: str, tag: str) -> tuple[bytes, dict[str, bytes]]:
    """What a run wrote to ``name`` and its offload directory, moved out of the way
    (so the next run writes the same paths afresh and its hints cite the same)."""
    out = Path(name).read_bytes()
    offload = _offload(Path(f"{name}.offload"))
    Path(name).rename(f"{tag}.{name}")
    Path(f"{name}.offload").rename(f"{tag}.{name}.offload")
    return out, offload


def test_reduce_file_gives_what_reduce_gives() -> None:
    source = _session()
    report, out = api.reduce_file(source, "out.jsonl", config=CHAIN)
    first = _set_aside("out.jsonl", "old")
    done = ctxcli.reduce(source, ctxcli.Destination("out.jsonl"), config=CHAIN)
    assert out == done.output
    assert first == _set_aside("out.jsonl", "new")
    assert report.tokens_after == done.report.tokens_after < report.tokens_before
    assert [s.to_dict() for s in report.stages] == [s.to_dict() for s in done.report.stages]


def test_stats_file_gives_what_stats_gives() -> None:
    source = _session()
    old = api.stats_file(source, output="out.jsonl", config=CHAIN)
    new = ctxcli.stats(source, ctxcli.Destination("out.jsonl"), config=CHAIN)
    assert old.to_dict() == new.to_dict()
    assert new.offload_dir is not None and new.offload_dir.endswith("out.jsonl.offload")


def test_restore_file_gives_what_restore_gives() -> None:
    source = _session()
    ctxcli.reduce(source, ctxcli.Destination("out.jsonl"), config=CHAIN)
    restored = ctxcli.restore("out.jsonl")
    assert api.restore_file("out.jsonl") == restored.data == source.read_bytes()
    assert api.restore_file("out.jsonl", "back.jsonl") == Path("back.jsonl").read_bytes()


def test_restore_transcript_is_deprecated_and_gives_what_restore_gives() -> None:
    source = _session()
    ctxcli.reduce(source, ctxcli.Destination("out.jsonl"), config=CHAIN)
    with pytest.warns(DeprecationWarning, match=r"api\.restore_transcript is deprecated"):
        old = api.restore_transcript("out.jsonl", "a.jsonl")
    new = ctxcli.restore("out.jsonl", ctxcli.Destination("b.jsonl"))
    assert old.data == new.data == source.read_bytes()
    assert [s.restored_sha256 for s in old.steps] == [s.restored_sha256 for s in new.steps]
    assert Path("a.jsonl").read_bytes() == Path("b.jsonl").read_bytes()


def test_reduce_in_place_is_deprecated_and_gives_what_reduce_gives() -> None:
    a, b = _session("a.jsonl"), _session("b.jsonl")
    with pytest.warns(DeprecationWarning, match=r"api\.reduce_in_place is deprecated"):
        report, change = api.reduce_in_place(a, config=CHAIN)
    done = ctxcli.reduce(b, ctxcli.Destination(in_place=True, stream=True), config=CHAIN)
    assert done.change is not None and change.record is not None
    # The same bytes but for the offload directory each cites (its own, beside it).
    cited = b.read_bytes().replace(b"b.jsonl.offload", b"a.jsonl.offload")
    assert a.read_bytes() == cited != tool_session("front door", size=6000)
    assert report.tokens_after == done.report.tokens_after
    assert (change.bytes_before, change.bytes_after) == (
        done.change.bytes_before,
        done.change.bytes_after,
    )
    assert ctxcli.restore(a).data == ctxcli.restore(b).data


def test_reduce_records_is_deprecated_and_gives_what_reduce_file_writes() -> None:
    source = _session()
    records = [json.loads(line) for line in source.read_bytes().splitlines()]
    off = str(Path("off").resolve())  # a file's hints cite the absolute path
    _, out = api.reduce_file(source, config=CHAIN, offload_dir=off)
    with pytest.warns(DeprecationWarning, match="use ctxcli.reduce_row"):
        old = ctxcli.reduce_records(records, config=CHAIN, offload_dir=off)  # type: ignore[attr-defined]
    assert old.records == [json.loads(line) for line in out.splitlines()]
    # What replaces it keeps the same records, cited by hash, and brings them back.
    row = ctxcli.reduce_row(records, CHAIN, offload_root=off)
    assert row.stats["tokens_before"] == old.report.tokens_before
    assert row.stats["offloaded"] == len(old.offload) == 1
    assert ctxcli.restore_row(row.value, row.restore, row.blobs) == records


def test_no_library_caller_of_a_deprecated_route_is_left() -> None:
    # The suite runs with filterwarnings = error: a library route through a deprecated
    # one would fail every test that takes it; this finds one no test takes.
    deprecated = {"reduce_in_place", "restore_transcript", "reduce_records"}
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                assert name not in deprecated, f"{path.relative_to(REPO)}:{node.lineno}: {name}"


# -- on_invalid: one default per command, one type ------------------------------------------


def _defaults(fn: Any) -> Any:
    import inspect

    return inspect.signature(fn).parameters["on_invalid"].default


def test_every_library_default_comes_from_the_one_place() -> None:
    from ctxcli.datasets.rows import RowReducer
    from ctxcli.pipeline.options import RunOptions

    assert DEFAULT_ON_INVALID is OnInvalid.AUTO and VALIDATE_ON_INVALID is OnInvalid.ERROR
    assert RunOptions().on_invalid is DEFAULT_ON_INVALID
    assert _defaults(RowReducer.__init__) is DEFAULT_ON_INVALID
    assert _defaults(api.validate) is VALIDATE_ON_INVALID


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("reduce", DEFAULT_ON_INVALID),
        ("stats", DEFAULT_ON_INVALID),
        ("report", DEFAULT_ON_INVALID),
        ("validate", VALIDATE_ON_INVALID),
    ],
)
def test_every_command_default_comes_from_the_one_place(command: str, expected: OnInvalid) -> None:
    import typer.main

    from ctxcli.cli import app

    group: Any = typer.main.get_command(app)
    (param,) = [p for p in group.commands[command].params if p.name == "on_invalid"]
    assert param.default == expected.value


def test_report_previews_what_reduce_reads() -> None:
    # A Claude Code line that is not JSON: reduce and stats keep it (AUTO); the report's
    # library call used to stop on it (its own default was "error").
    from ctxcli.report import analyze_bytes

    line = {
        "type": "user",
        "uuid": "u1",
        "sessionId": "s",
        "message": {"role": "user", "content": "hi"},
    }
    raw = json.dumps(line).encode() + b"\n{not json\n"
    Path("s.jsonl").write_bytes(raw)
    data = analyze_bytes(raw, path="s.jsonl")
    preview = ctxcli.stats("s.jsonl")
    assert data.report.format == preview.format == "claude_code"
    assert data.report.warnings == preview.warnings != []


def test_no_library_signature_takes_on_invalid_as_a_string() -> None:
    found = []
    for path in SRC.rglob("*.py"):
        if path.parent.name == "cli":
            continue  # the boundary: it converts the flag's text once
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.arg | ast.AnnAssign):
                name = node.arg if isinstance(node, ast.arg) else getattr(node.target, "id", "")
                note = node.annotation
                if name == "on_invalid" and note is not None and "str" in ast.unparse(note):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(note)}")
    assert found == []


def test_run_options_checks_a_value_from_an_untyped_caller() -> None:
    from ctxcli.core.errors import ConfigError

    assert ctxcli.RunOptions("keep").on_invalid is OnInvalid.KEEP  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="on_invalid 'skip' is invalid"):
        ctxcli.RunOptions("skip")  # type: ignore[arg-type]


def test_a_batch_restore_in_place_takes_the_run_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # restore_many took no RunOptions: --force and --live-seconds of a batch restore in
    # place were dropped, and a session written a moment ago could not be restored.
    from support.cli import invoke

    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_DATA_HOME", "CTX_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    project = tmp_path / "home" / ".claude" / "projects" / "-work-demo"
    project.mkdir(parents=True)
    sample = (REPO / "sample_transcripts" / "claude_code_session.jsonl").read_bytes()
    sessions = [project / f"{n}0b0e3c6a-8f2d-4c1e-9a7b-3d4f5e6a7b8c.jsonl" for n in (1, 2)]
    line = sample.splitlines(keepends=True)[-1]
    for path in sessions:
        path.write_bytes(sample)
        invoke(["reduce", str(path), "--in-place", "--force", "--preset", "claude-code-resume"])
        assert path.read_bytes() != sample
        with path.open("ab") as client:  # the client writes on: the session is in use
            client.write(line)
    args = ["restore", *map(str, sessions), "--in-place"]
    assert invoke(args, code=2).stderr.count("looks in use") == 2
    invoke([*args, "--force"])
    assert [p.read_bytes() for p in sessions] == [sample + line, sample + line]
