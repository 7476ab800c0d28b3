"""Property tests for the write path (issue 18): aliasing paths, racing runs, numbers.

Not only the reported repros: random batches whose outputs and offload directories
alias inputs, each other, the working directory or a ``sub/..`` spelling; random
parallel runs onto shared outputs and offload directories; random number texts in
fields no stage touches. The invariants: ctx exits 0 or 2 (never 123), never changes
an input or a file it did not write, every output it reports is restorable, and an
untouched number keeps its exact text.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxcli.api import RunOptions, reduce_file, restore_file
from ctxcli.core.errors import CtxError
from support.transcript_builders import FORMATS, build, tool_session, write_sessions

TRUNCATE = '[[stages]]\nuse = "truncate_tool_output"\nmax_length = 300\n'
SETTINGS = settings(
    # CTX_FUZZ_EXAMPLES=500 for a longer hunt than the default suite affords.
    max_examples=int(os.environ.get("CTX_FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _fresh(root: Path) -> dict[str, bytes]:
    """A clean tree: two input dirs, an output dir, a sentinel file in each."""
    if root.exists():
        shutil.rmtree(root)
    files = {
        "x/a.jsonl": tool_session("xa"),
        "x/b.jsonl": tool_session("xb"),
        "out/a.jsonl": tool_session("outa"),
        "keep.txt": b"precious",
        "x/keep.txt": b"precious",
        "out/keep.txt": b"precious",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "ctx.toml").write_text(TRUNCATE)
    return files


# Paths a run may be pointed at: files, directories, aliases of both.
PATHS = [
    "x/a.jsonl",
    "x/b.jsonl",
    "out/a.jsonl",
    "x",
    "out",
    ".",
    "out/sub/..",
    "x/../out",
    "out/a.jsonl.offload",
    "new",
    "new/o.jsonl",
    "keep.txt",
]


def _run(args: list[str]) -> Any:
    """Run the CLI in-process; any exception but an exit is a failure."""
    from ctxcli.cli import app

    result = CliRunner().invoke(app, args, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def _expand(inputs: list[str]) -> set[str]:
    found = set()
    for name in inputs:
        path = Path(name)
        if path.is_dir():
            found |= {os.path.normpath(p) for p in path.rglob("*.jsonl")}
        else:
            found.add(os.path.normpath(name))
    return found


def _check(root: Path, files: dict[str, bytes], code: int, err: str) -> None:
    assert code in (0, 2), err
    assert "internal error" not in err, err
    for rel, data in files.items():
        path = root / rel
        # Nothing ctx was not asked to write may change; inputs never change.
        assert path.is_file() and path.read_bytes() == data, f"{rel} was changed\n{err}"


@SETTINGS
@given(
    inputs=st.lists(st.sampled_from(PATHS[:5]), min_size=2, max_size=3),
    out=st.sampled_from(["out", "x", "new", "out/sub/..", "x/../out"]),
    offload=st.sampled_from([None, *PATHS]),
    force=st.booleans(),
    jobs=st.sampled_from(["1", "1", "2"]),
)
def test_random_batches_never_overwrite_an_input(
    tmp_path: Path, inputs: list[str], out: str, offload: str | None, force: bool, jobs: str
) -> None:
    root = tmp_path / "tree"
    files = _fresh(root)
    os.chdir(root)
    args = ["reduce", *inputs, "-o", out, "-j", jobs, "--json"]
    args += ["--offload-dir", offload] if offload else []
    args += ["--force"] if force else []
    inputs_before = _expand(inputs)
    result = _run(args)
    written = []
    if result.stdout:
        for entry in json.loads(result.stdout)["files"]:
            if "error" in entry:
                continue
            name = os.path.normpath(entry["input"])
            written.append(name)
            back = restore_file(entry["output"], offload_dir=entry["offload_dir"])
            assert back == files.get(name, back)
            # An output it reports may replace a file, but never an input.
            out_name = os.path.normpath(entry["output"])
            assert out_name not in inputs_before, (out_name, inputs)
            files.pop(out_name, None)
    _check(root, files, result.exit_code, result.stderr)


@SETTINGS
@given(
    source=st.sampled_from(PATHS[:3]),
    out=st.sampled_from(["-", *PATHS]),
    offload=st.sampled_from([None, *PATHS, "o.off", "new/o.jsonl/x"]),
    force=st.booleans(),
)
def test_random_single_runs_never_touch_what_they_must_not(
    tmp_path: Path, source: str, out: str, offload: str | None, force: bool
) -> None:
    root = tmp_path / "tree"
    files = _fresh(root)
    os.chdir(root)
    args = ["reduce", source, "-o", out, "-q"]
    args += ["--offload-dir", offload] if offload else []
    args += ["--force"] if force else []
    result = _run(args)
    if result.exit_code == 0 and out != "-":
        # The one file it may replace is its output (when that is not an input).
        files.pop(os.path.normpath(out), None)
        off = offload or f"{out}.offload"
        assert restore_file(out, offload_dir=off) == files[source]
    _check(root, files, result.exit_code, result.stderr)


@SETTINGS
@given(
    runs=st.lists(
        st.tuples(
            st.integers(0, 3),  # which input
            st.sampled_from(["o1.jsonl", "o2.jsonl"]),
            st.sampled_from([None, "shared.off"]),
        ),
        min_size=2,
        max_size=6,
    ),
    force=st.booleans(),
)
def test_random_parallel_runs_leave_restorable_pairs(
    tmp_path: Path, runs: list[tuple[int, str, str | None]], force: bool
) -> None:
    root = tmp_path / "race"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir()
    os.chdir(root)
    Path("ctx.toml").write_text(TRUNCATE)
    sources = write_sessions(root, 4, 1500, 700)
    bugs: list[BaseException] = []

    def run(i: int, out: str, off: str | None) -> None:
        try:
            reduce_file(sources[i], out, offload_dir=off, options=RunOptions(force=force))
        except CtxError:
            pass  # a refusal (another transcript's offload) is fine
        except BaseException as exc:
            bugs.append(exc)

    threads = [threading.Thread(target=run, args=r) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bugs, bugs
    originals = {s.read_bytes() for s in sources}
    for out in ("o1.jsonl", "o2.jsonl"):
        if not Path(out).exists():
            continue
        candidates = [d for d in (f"{out}.offload", "shared.off") if Path(d).is_dir()]
        restored = []
        for off in candidates:
            try:
                restored.append(restore_file(out, offload_dir=off))
            except CtxError:
                continue
        assert all(r in originals for r in restored), out
        # --force lets a later run replace the shared directory an output relied on;
        # otherwise every output must restore from one of the directories.
        if not force or all(off is None for _i, _o, off in runs):
            assert restored, out


# Number texts: plain, exponent forms, past double range, past 64-bit ints, -0.
NUMBER = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr).filter(lambda t: "e" not in t),
    st.builds(
        lambda m, e, big: f"{m}{'E' if big else 'e'}{e}",
        st.integers(-999, 999),
        st.integers(-500, 500),
        st.booleans(),
    ),
    st.sampled_from(["-0", "-0.0", "0.10000000000000001", "1.50", "1e400", "-1e-400"]),
)


@SETTINGS
@given(
    fmt=st.sampled_from(FORMATS),
    numbers=st.lists(NUMBER, min_size=1, max_size=6),
    compact=st.booleans(),
)
def test_random_numbers_in_untouched_fields_keep_their_text(
    tmp_path: Path, fmt: str, numbers: list[str], compact: bool
) -> None:
    os.chdir(tmp_path)
    Path("ctx.toml").write_text(TRUNCATE)
    sep = (",", ":") if compact else (", ", ": ")
    meta = "{" + sep[0].join(f'"n{i}"{sep[1]}{n}' for i, n in enumerate(numbers)) + "}"
    turns = [
        ("user", "look"),
        ("assistant", None, [("call_1", "grep", {"q": "x"})]),
        ("results", [("call_1", "line\n" * 400, False)]),
        ("assistant", "done", []),
    ]
    lines = []
    for record in build(fmt, turns):
        text = json.dumps(record, separators=sep, ensure_ascii=False)
        lines.append('{"meta"' + sep[1] + meta + sep[0] + text[1:])
    src = tmp_path / "in.jsonl"
    src.write_bytes(("\n".join(lines) + "\n").encode())
    _report, out = reduce_file(src, tmp_path / "out.jsonl", options=RunOptions(force=True))
    assert out != src.read_bytes()
    for line in out.splitlines():
        json.loads(line, parse_constant=_refuse)
        assert meta.encode() in line
    assert restore_file(tmp_path / "out.jsonl") == src.read_bytes()


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
