"""Incremental re-runs: a grown transcript reduced again keeps a prefix and equals a full run.

The property the issue asks for: cut a real transcript at a random line, reduce the
start into OUT, then reduce the whole file into the same OUT: the output, the offload
directory and the manifest are those of one full run, and ``ctx restore`` gives the
whole file back. Each check runs the two flows in twin directories under the same
relative names, so the hints cite the same offload directory.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.api import Destination, RunOptions, reduce, reduce_file, restore_file
from ctxcli.core.errors import OffloadError
from ctxcli.core.model import Conversation
from ctxcli.pipeline.config import Config, build_config
from ctxcli.pipeline.rerun import merge_ops, pack_skeletons, script_cut, unpack_skeletons
from ctxcli.pipeline.results import Report
from ctxcli.stages import STAGE_REGISTRY, StageResult, everything_final, register
from ctxcli.stages.base import StageOptions
from support.cli import invoke
from support.paths import SHARED, need_shared

REAL = [
    SHARED / "anthropic_derived_from_cc_mclaude_3cfce0ff.jsonl",
    SHARED / "oai_taubench_airline_task2_trial1.jsonl",
    SHARED / "codex_agentcmd_2025-09-24T19-22-20.jsonl",
    SHARED / "codex_agentcmd_2025-09-25T08-02-05.jsonl",
    SHARED / "cc_mclaude_c76e5be5.jsonl",
    SHARED / "cc_spotter_4d5611e5_subagent_a2898e3.jsonl",
]


def chain(**clear: Any) -> Config:
    return build_config(
        {
            "tokenizer": "approx",
            "stages": [
                {"use": "truncate_tool_output", "max_chars": 1500},
                {"use": "clear_tool_results", "max_tokens": 1500, "keep_rounds": 1, **clear},
            ],
        },
        "test",
    )


CONFIGS = {
    "default-like": chain(),
    "keep-results": chain(keep_rounds=0, keep_results=3, clear_arguments=True, hint="long"),
    "cache-friendly": chain(clear_at_least_tokens=400, keep_rounds=2),
}


def session(rounds: int, seed: int = 0) -> bytes:
    """An OpenAI-chat session: a task, then rounds of one call and its result."""
    lines = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "The cache test fails."},
    ]
    for i in range(rounds):
        call = f"call_{seed}_{i}"
        size = 200 + (i * 7919 + seed * 104729) % 4000
        lines.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": f"ls {i}"})},
                    }
                ],
            }
        )
        body = "\n".join(f"line {i}.{n} " + "x" * (n % 50) for n in range(size // 30))
        lines.append({"role": "tool", "tool_call_id": call, "content": body})
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


# Runs compared across directories cite one relative offload path (hints cite absolute
# paths otherwise, and a path's tokens depend on its characters).
CITED = "out.jsonl.offload"


def _out(source: str, config: Config) -> tuple[Report, bytes]:
    done = reduce(source, Destination("out.jsonl", cite_as=CITED), config=config)
    return done.report, done.output


def twin_runs(tmp: Path, start: bytes, whole: bytes, config: Config) -> tuple[Path, Path]:
    """Reduce ``start`` then ``whole`` into one output, and ``whole`` alone into a twin."""
    grown, full = tmp / "grown", tmp / "full"
    grown.mkdir()
    full.mkdir()
    cwd = os.getcwd()
    try:
        os.chdir(grown)
        Path("session.jsonl").write_bytes(start)
        _out("session.jsonl", config)
        manifest = json.loads(Path("out.jsonl.offload/manifest.json").read_bytes())
        twin_runs.keepable = "rerun" in manifest  # type: ignore[attr-defined]
        Path("session.jsonl").write_bytes(whole)
        # Written as it is made (what the CLI does): the kept output, then the tail.
        done = reduce(
            "session.jsonl", Destination("out.jsonl", stream=True, cite_as=CITED), config=config
        )
        report, streamed = done.report, done.output
        assert streamed == b""
        os.chdir(full)
        Path("session.jsonl").write_bytes(whole)
        full_report, _ = _out("session.jsonl", config)
    finally:
        os.chdir(cwd)
    twin_runs.kept = report.kept_lines  # type: ignore[attr-defined]
    # The totals a user reads are the full run's too (per-stage counters cover the rest).
    fields = ("tokens_before", "tokens_after", "resume_tokens_before", "resume_tokens_after")
    assert [getattr(report, f) for f in fields] == [getattr(full_report, f) for f in fields]
    assert [(s.tokens_before, s.tokens_after) for s in report.stages] == [
        (s.tokens_before, s.tokens_after) for s in full_report.stages
    ]
    return grown, full


def assert_same_as_full(grown: Path, full: Path, whole: bytes) -> None:
    """The output and every offloaded file are the full run's; so is the manifest, but
    for how the restore script rebuilds a record: a recipe may cite another file holding
    the very same text (see pipeline/offload.py), and the pack's offsets follow."""
    assert (grown / "out.jsonl").read_bytes() == (full / "out.jsonl").read_bytes()
    texts = tree(grown / "out.jsonl.offload")
    manifest = json.loads(texts.pop("manifest.json"))
    full_texts = tree(full / "out.jsonl.offload")
    full_manifest = json.loads(full_texts.pop("manifest.json"))
    # A re-run writes its pack under the other name: the previous output's restore
    # reads the previous pack until the new output is in place.
    texts.pop(manifest["pack"]["name"]), full_texts.pop(full_manifest["pack"]["name"])
    assert texts == full_texts
    for key in ("script", "pack"):
        manifest.pop(key), full_manifest.pop(key)
    assert manifest == full_manifest
    restore_file(str(grown / "out.jsonl"), str(grown / "back.jsonl"))
    assert (grown / "back.jsonl").read_bytes() == whole


def assert_same_as_a_full_run(here: Path, whole: bytes, config: Config) -> None:
    """``here`` (runs of session.jsonl into out.jsonl) against one full run of ``whole``."""
    (here / "full").mkdir()
    os.chdir(here / "full")
    Path("session.jsonl").write_bytes(whole)
    _out("session.jsonl", config)
    assert_same_as_full(here, here / "full", whole)


def _claude_code_session() -> bytes:
    return (need_shared() / "cc_mclaude_c76e5be5.jsonl").read_bytes()


def cut_at(data: bytes, fraction: float) -> bytes:
    """The lines of ``data`` up to about ``fraction`` of its bytes (at least one)."""
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    return data[: ends[max(0, min(len(ends) - 2, int(fraction * len(ends))))]]


@pytest.mark.slow
@pytest.mark.real_data
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(fraction=st.floats(0.05, 0.97))
def test_real_transcript_cut_anywhere_reduces_like_a_full_run(
    path: Path, name: str, fraction: float, tmp_path_factory: pytest.TempPathFactory
) -> None:
    whole = path.read_bytes()
    grown, full = twin_runs(
        tmp_path_factory.mktemp("rerun"), cut_at(whole, fraction), whole, CONFIGS[name]
    )
    assert_same_as_full(grown, full, whole)
    # Whatever the first run settled (it cleared something), the re-run kept.
    assert (twin_runs.kept > 0) == twin_runs.keepable  # type: ignore[attr-defined]
    if fraction >= 0.5 and path.stat().st_size > 500_000:
        assert twin_runs.kept > 0  # type: ignore[attr-defined]


def test_a_grown_session_keeps_most_of_it_and_equals_a_full_run(tmp_path: Path) -> None:
    whole = session(60)
    grown, full = twin_runs(tmp_path, cut_at(whole, 0.9), whole, CONFIGS["default-like"])
    assert_same_as_full(grown, full, whole)
    # The prefix really was kept: all but the protected last round of the first run.
    assert twin_runs.kept > 100  # type: ignore[attr-defined]
    manifest = json.loads((grown / "out.jsonl.offload" / "manifest.json").read_bytes())
    assert manifest["rerun"]["records"] > twin_runs.kept  # type: ignore[attr-defined]


def test_growing_again_and_again_stays_equal_to_a_full_run(tmp_path: Path) -> None:
    whole = session(50, seed=3)
    config = CONFIGS["keep-results"]
    os.chdir(tmp_path)
    kept = []
    for fraction in (0.3, 0.5, 0.8, 1.0):
        Path("session.jsonl").write_bytes(cut_at(whole, fraction) if fraction < 1 else whole)
        report, _ = _out("session.jsonl", config)
        kept.append(report.kept_lines)
    assert kept[0] == 0 and all(k > 0 for k in kept[1:])
    assert kept == sorted(kept)
    assert_same_as_a_full_run(tmp_path, whole, config)


def test_a_pending_call_at_the_end_is_not_kept_without_its_result(tmp_path: Path) -> None:
    whole = session(30, seed=5)
    lines = whole.splitlines(keepends=True)
    start = b"".join(lines[:-1])  # ends with a call whose result comes with the append
    grown, full = twin_runs(tmp_path, start, whole, CONFIGS["default-like"])
    assert_same_as_full(grown, full, whole)
    rerun = json.loads((tmp_path / "grown" / "out.jsonl.offload" / "manifest.json").read_bytes())
    assert rerun["rerun"]["records"] <= len(lines) - 1


def test_a_last_line_without_its_end_is_not_kept(tmp_path: Path) -> None:
    whole = session(30, seed=7)
    start = whole.rstrip(b"\n")  # the last line lacks its end until the append
    whole = start + b'\n{"role": "user", "content": "and then?"}\n'
    grown, full = twin_runs(tmp_path, start, whole, CONFIGS["default-like"])
    assert_same_as_full(grown, full, whole)


def test_changed_config_output_or_prefix_run_in_full(tmp_path: Path) -> None:
    whole = session(40, seed=9)
    start = cut_at(whole, 0.7)
    os.chdir(tmp_path)
    Path("start.jsonl").write_bytes(start)
    default = CONFIGS["default-like"]

    def grow(out: str, config: Config = default, edit_output: bool = False, **kw: Any) -> int:
        Path("session.jsonl").write_bytes(start)
        reduce_file("session.jsonl", out, config=default)
        if edit_output:
            Path(out).write_bytes(Path(out).read_bytes() + b"\n")
        Path("session.jsonl").write_bytes(whole)
        report, _ = reduce_file("session.jsonl", out, config=config, **kw)
        return report.kept_lines

    assert grow("a.jsonl") > 0
    # Another configuration: nothing of the previous run's decisions is reused.
    assert grow("b.jsonl", CONFIGS["cache-friendly"]) == 0
    # An edited output is not trusted.
    assert grow("c.jsonl", edit_output=True) == 0
    # incremental=False, or the setting off, runs in full.
    assert grow("d.jsonl", options=RunOptions(incremental=False)) == 0
    assert grow("e.jsonl", default.with_overrides(incremental=False)) == 0
    outputs = {
        Path(n).read_bytes().replace(f"{n}.offload".encode(), b"OFFLOAD")
        for n in ("a.jsonl", "c.jsonl", "d.jsonl", "e.jsonl")
    }
    assert len(outputs) == 1
    # A transcript that does not start with the previous input is another one.
    Path("session.jsonl").write_bytes(b"\n" + whole)
    with pytest.raises(OffloadError, match="offload of another transcript"):
        reduce_file("session.jsonl", "a.jsonl", config=default)


def test_formats_and_stages_without_a_frontier_keep_nothing(tmp_path: Path) -> None:
    os.chdir(tmp_path)
    Path("session.jsonl").write_bytes(session(20))
    dedupe = build_config(
        {
            "tokenizer": "approx",
            "stages": [{"use": "dedupe_outputs"}, {"use": "truncate_tool_output"}],
        },
        "test",
    )
    reduce_file("session.jsonl", "out.jsonl", config=dedupe)
    assert "rerun" not in json.loads(Path("out.jsonl.offload/manifest.json").read_bytes())
    json_doc = SHARED / "minisweagent_sqlfluff-1733_deepseek-chat.traj.json"
    if json_doc.exists():  # a JSON document is one unit: nothing to keep
        reduce_file(str(json_doc), "doc.json", config=CONFIGS["default-like"])
        assert "rerun" not in json.loads(Path("doc.json.offload/manifest.json").read_bytes())


class _Sneaky(StageOptions):
    """Options of a stage that breaks its frontier promise."""


@pytest.fixture
def own_stages() -> Iterator[None]:
    """The stage registry as the built-ins make it, before and after the test."""
    STAGE_REGISTRY.reset()
    yield
    STAGE_REGISTRY.reset()


def test_a_stage_that_touches_the_kept_prefix_makes_a_full_run(
    tmp_path: Path, own_stages: None
) -> None:
    @register("sneaky_upper", options=_Sneaky, frontier=everything_final)
    def sneaky_upper(conv: Conversation, opts: _Sneaky, ctx: Any) -> StageResult:
        # Rewrites the first message every time: a promise broken.
        first = conv.messages[0]
        blocks = [b.with_text(b.text.upper() + "!") for b in first.blocks]
        return StageResult(conv.with_messages([first.with_blocks(blocks), *conv.messages[1:]]))

    config = build_config(
        {
            "tokenizer": "approx",
            "stages": [{"use": "sneaky_upper"}, {"use": "truncate_tool_output"}],
        },
        "test",
    )
    whole = session(20, seed=11)
    grown, full = twin_runs(tmp_path, cut_at(whole, 0.6), whole, config)
    assert twin_runs.kept == 0  # type: ignore[attr-defined]
    assert (grown / "out.jsonl").read_bytes() == (full / "out.jsonl").read_bytes()


def test_the_cli_says_what_it_kept(tmp_path: Path) -> None:
    os.chdir(tmp_path)
    whole = session(40, seed=13)
    Path("ctx.toml").write_text(
        'tokenizer = "approx"\n[[stages]]\nuse = "truncate_tool_output"\nmax_length = 1500\n'
        '[[stages]]\nuse = "clear_tool_results"\nmax_tokens = 1500\n'
    )
    Path("s.jsonl").write_bytes(cut_at(whole, 0.5))
    invoke(["reduce", "s.jsonl", "-o", "o.jsonl"])
    Path("s.jsonl").write_bytes(whole)
    result = invoke(["reduce", "s.jsonl", "-o", "o.jsonl"])
    assert "lines kept from the previous run" in result.stderr
    result = invoke(["reduce", "s.jsonl", "-o", "o.jsonl", "--no-incremental", "--json"])
    assert json.loads(result.stdout)["files"][0]["kept_lines"] == 0


def test_script_cut_and_merge_rebuild_the_script() -> None:
    # c2 | b (record 2 changed) s1 | c3 | b (record 6 dropped) | s1 (created) | c1
    ops: list[list[Any]] = [
        ["c", 2],
        ["b", 0, 5, "x"],
        ["s", 1],
        ["c", 3],
        ["b", 5, 4, "y"],
        ["s", 1],
        ["c", 1],
    ]
    for records in range(0, 9):
        head, units = script_cut(ops, records)
        inputs = sum(op[1] if op[0] == "c" else (1 if op[0] == "b" else 0) for op in head)
        assert inputs == records
        outputs = sum(op[1] for op in head if op[0] in ("c", "s"))
        assert outputs == units
    head, _ = script_cut(ops, 4)
    assert head == [["c", 2], ["b", 0, 5, "x"], ["s", 1], ["c", 1]]
    assert merge_ops(head, [["c", 2], ["b", 5, 4, "y"], ["s", 1], ["c", 1]]) == ops


@pytest.mark.slow
@pytest.mark.real_data
def test_the_exact_in_process_reducer_sends_what_a_full_reduction_would(tmp_path: Path) -> None:
    """The same settled-prefix mechanism, in the agent loop (ctxcli.Reducer(prefix_policy="exact"))."""
    from ctxcli import Reducer

    path = REAL[0]
    messages = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    config = CONFIGS["default-like"]
    live = Reducer(config, api="anthropic", offload_dir=tmp_path / "off", prefix_policy="exact")
    settled = []
    for n in range(20, len(messages) + 1, 15):
        sent = live.reduce(messages[:n]).messages
        fresh = Reducer(
            config, api="anthropic", offload_dir=tmp_path / "off", prefix_policy="exact"
        )
        assert sent == fresh.reduce(messages[:n]).messages, n
        settled.append(live._state.settled)
    assert settled[-1] and settled == sorted(settled)


def test_a_new_result_for_a_kept_call_makes_a_full_run(tmp_path: Path) -> None:
    # Ids are reused in real files: a result that answers a call of the kept prefix
    # would be reduced next to a stand-in without text, so the re-run runs in full.
    start = session(30, seed=17)
    late = {"role": "tool", "tool_call_id": "call_17_0", "content": "late " * 900}
    whole = start + orjson.dumps(late) + b"\n"
    grown, full = twin_runs(tmp_path, start, whole, CONFIGS["default-like"])
    assert twin_runs.keepable and twin_runs.kept == 0  # type: ignore[attr-defined]
    assert_same_as_full(grown, full, whole)


def test_an_offloaded_file_edited_since_is_written_anew(tmp_path: Path) -> None:
    whole = session(40, seed=19)
    os.chdir(tmp_path)
    Path("session.jsonl").write_bytes(cut_at(whole, 0.7))
    reduce_file("session.jsonl", "out.jsonl", config=CONFIGS["default-like"])
    edited = sorted(Path("out.jsonl.offload/clear").iterdir())[0]
    time.sleep(0.01)
    edited.write_text("an agent wrote here")
    Path("session.jsonl").write_bytes(whole)
    report, _ = reduce_file("session.jsonl", "out.jsonl", config=CONFIGS["default-like"])
    assert report.kept_lines == 0  # not trusted: a full run
    assert edited.read_text() != "an agent wrote here"
    restore_file("out.jsonl", "back.jsonl")
    assert Path("back.jsonl").read_bytes() == whole


def test_a_manifest_naming_files_outside_is_not_trusted_by_a_rerun(tmp_path: Path) -> None:
    whole = session(40, seed=23)
    os.chdir(tmp_path)
    Path("session.jsonl").write_bytes(cut_at(whole, 0.7))
    reduce_file("session.jsonl", "out.jsonl", config=CONFIGS["default-like"])
    path = Path("out.jsonl.offload/manifest.json")
    manifest = json.loads(path.read_bytes())
    manifest["files"]["clear/../../session.jsonl"] = "0" * 64
    path.write_bytes(orjson.dumps(manifest))
    Path("session.jsonl").write_bytes(whole)
    # Not a previous run ctx can vouch for: replacing it takes force, and runs in full.
    with pytest.raises(OffloadError, match="another transcript"):
        reduce_file("session.jsonl", "out.jsonl", config=CONFIGS["default-like"])
    report, _ = reduce_file(
        "session.jsonl", "out.jsonl", config=CONFIGS["default-like"], options=RunOptions(force=True)
    )
    assert report.kept_lines == 0
    assert Path("session.jsonl").read_bytes() == whole  # the file it named is untouched


_SKELETON = (
    st.none()
    | st.dictionaries(
        st.sampled_from(["type", "uuid", "parentUuid", "isSidechain", "="]),
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    )
    | st.lists(st.integers(-9, 9) | st.just("="), max_size=3)
    | st.text(max_size=3)
)


@given(skeletons=st.lists(_SKELETON, max_size=30))
def test_packed_skeletons_unpack_to_themselves(skeletons: list[Any]) -> None:
    packed = pack_skeletons(iter(skeletons))
    assert unpack_skeletons(orjson.loads(orjson.dumps(packed))) == skeletons


@pytest.mark.parametrize(
    "damaged",
    [
        {"shapes": [["type"]], "rows": [[1, "x"]]},  # no such shape
        {"shapes": [["type"]], "rows": [[-1, "x"]]},
        {"shapes": [["type"]], "rows": [[0, "x", "y"]]},  # more values than keys
        {"shapes": [["type"]], "rows": [["0", "x"]]},
        {"shapes": [["type"]], "rows": [[]]},
        {"rows": []},
    ],
)
def test_damaged_skeletons_are_refused(damaged: dict[str, Any]) -> None:
    with pytest.raises((KeyError, TypeError, IndexError, ValueError)):
        unpack_skeletons(damaged)


@pytest.mark.slow
def test_a_claude_code_session_grown_again_and_again_equals_a_full_run(tmp_path: Path) -> None:
    # Its kept records' skeletons (what the resume walk reads) carry over each re-run.
    whole = _claude_code_session()
    config = CONFIGS["default-like"]
    os.chdir(tmp_path)
    kept = []
    for fraction in (0.4, 0.7, 1.0):
        Path("session.jsonl").write_bytes(cut_at(whole, fraction) if fraction < 1 else whole)
        report, _ = _out("session.jsonl", config)
        kept.append(report.kept_lines)
    assert kept[0] == 0 and all(k > 0 for k in kept[1:]), kept
    manifest = json.loads(Path("out.jsonl.offload/manifest.json").read_bytes())
    assert len(manifest["rerun"]["skeletons"]["rows"]) == manifest["rerun"]["records"]
    assert_same_as_a_full_run(tmp_path, whole, config)


@pytest.mark.slow
def test_damaged_skeletons_in_the_manifest_make_a_full_run(tmp_path: Path) -> None:
    whole = _claude_code_session()
    config = CONFIGS["default-like"]
    os.chdir(tmp_path)
    Path("session.jsonl").write_bytes(cut_at(whole, 0.6))
    _out("session.jsonl", config)
    manifest_path = Path("out.jsonl.offload/manifest.json")
    manifest = json.loads(manifest_path.read_bytes())
    manifest["rerun"]["skeletons"]["rows"][0] = [99, "progress"]  # names no shape
    manifest_path.write_bytes(orjson.dumps(manifest) + b"\n")
    Path("session.jsonl").write_bytes(whole)
    report, _ = _out("session.jsonl", config)
    assert report.kept_lines == 0  # nothing taken from the damaged manifest
    assert_same_as_a_full_run(tmp_path, whole, config)
