"""Trajectory datasets: SWE-agent (v0, v1 + its copies), tau-bench runs, OpenHands, rows.

Real files are read in place from ../shared/transcripts; the layouts no real file there
has (tau-bench run arrays, SWE-agent v0, OpenHands output.jsonl) are derived from the
real files' own messages (tau-bench, SWE-agent) or built from the layout FORMATS.md
describes (OpenHands), and every one must restore byte-identical.
"""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcli.api import reduce_file, restore_file
from ctxcli.core.errors import TranscriptError
from ctxcli.formats import Document, split_collection
from ctxcli.formats.jsontext import array_items, item_spans
from ctxcli.pipeline import compose as reducer
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.pipeline.options import RunOptions
from support.paths import SHARED

TIGHT = build_config(
    {"stages": [{"use": "truncate_tool_output", "max_chars": 400}]}, "trajectory tests"
)
SWE = SHARED / "sweagent_marshmallow-1867_fc.traj"
TAU = SHARED / "oai_taubench_airline_task2_trial1.jsonl"
MINI = SHARED / "minisweagent_sqlfluff-1733_deepseek-chat.traj.json"
needs_shared = pytest.mark.real_data


def round_trip(raw: bytes, tmp_path: Path, name: str = "in.json") -> tuple[bytes, Any]:
    """Reduce ``raw`` through files, restore it, and return the output and report."""
    src = tmp_path / name
    src.write_bytes(raw)
    report, out = reduce_file(src, tmp_path / f"out-{name}", config=TIGHT)
    assert restore_file(tmp_path / f"out-{name}") == raw
    return out, report


def tau_messages() -> list[dict[str, Any]]:
    return [json.loads(line) for line in TAU.read_bytes().splitlines()]


def tool_lengths(messages: list[dict[str, Any]]) -> int:
    return sum(len(m.get("content") or "") for m in messages if m.get("role") == "tool")


# -- SWE-agent ---------------------------------------------------------------------------


@needs_shared
def test_sweagent_v1_copies_shrink_with_the_history(tmp_path: Path) -> None:
    raw = SWE.read_bytes()
    out, report = round_trip(raw, tmp_path, "marshmallow.traj")
    assert report.format == "json_doc" and report.tokens_after < report.tokens_before
    before, after = json.loads(raw), json.loads(out)
    assert tool_lengths(after["history"]) < tool_lengths(before["history"])
    copies = lambda d: len(json.dumps([s["messages"] for s in d["trajectory"]]))  # noqa: E731
    assert copies(after) < copies(before) * 0.8
    # Every copy is a history message as reduced, or one SWE-agent itself shortened.
    new_history = after["history"]
    for step, old_step in zip(after["trajectory"], before["trajectory"], strict=True):
        for i, m in enumerate(step["messages"]):
            assert m == new_history[i] or m == old_step["messages"][i] != before["history"][i]
        obs = step["observation"]
        assert obs == old_step["observation"] or "[ctx: output truncated" in obs
    assert out == json.dumps(after, indent=2).encode()  # the file's own style


def to_v0(doc: dict[str, Any]) -> dict[str, Any]:
    """SWE-agent v0 layout of a v1 trajectory: fenced actions, observations as user turns."""
    history = []
    for m in doc["history"]:
        if m["role"] == "assistant" and m.get("tool_calls"):
            action = m["action"]
            content = f"{m.get('thought', '')}\n\n```\n{action}\n```\n"
            history.append(
                {
                    "role": "assistant",
                    "content": content,
                    "thought": m.get("thought"),
                    "action": action,
                    "agent": "primary",
                }
            )
        elif m["role"] == "tool":
            history.append({"role": "user", "content": m["content"], "agent": "primary"})
        else:
            history.append({"role": m["role"], "content": m["content"], "agent": "primary"})
    trajectory = [
        {k: v for k, v in step.items() if k != "messages"} | {"state": json.dumps(step["state"])}
        for step in doc["trajectory"]
    ]
    return {
        "environment": "swe_main",
        "trajectory": trajectory,
        "history": history,
        "info": doc["info"],
    }


@needs_shared
def test_sweagent_v0_observations_are_tool_results(tmp_path: Path) -> None:
    doc = to_v0(json.loads(SWE.read_bytes()))
    raw = json.dumps(doc, indent=2).encode()
    from ctxcli.core.model import Kind
    from ctxcli.formats import load

    conv = load(raw).conversation
    results = list(conv.iter_blocks(Kind.TOOL_RESULT))
    assert len(results) == sum(1 for m in doc["history"] if m.get("action")) > 5
    assert all(conv.call_of(ref) is not None for ref, _ in results)
    out, _ = round_trip(raw, tmp_path, "v0.traj")
    after = json.loads(out)
    assert tool_lengths(after["history"]) == 0  # no tool role: observations stay user turns
    users = lambda d: sum(len(m["content"]) for m in d["history"] if m["role"] == "user")  # noqa: E731
    assert users(after) < users(doc) * 0.5
    assert [m["role"] for m in after["history"]] == [m["role"] for m in doc["history"]]
    assert [m.get("action") for m in after["history"]] == [m.get("action") for m in doc["history"]]
    observations = [s["observation"] for s in after["trajectory"]]
    assert any("[ctx: output truncated" in o for o in observations)


@needs_shared
def test_minisweagent_real_file_round_trips(tmp_path: Path) -> None:
    raw = MINI.read_bytes()
    out, report = round_trip(raw, tmp_path, "mini.traj.json")
    assert report.tokens_after < report.tokens_before and len(out) < len(raw)


# -- tau-bench runs ----------------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("indent", [None, 2, 4])
def test_taubench_runs_each_reduced(indent: int | None, tmp_path: Path) -> None:
    traj = tau_messages()
    runs = [
        {"task_id": i, "reward": 1.0, "info": {"n": i}, "traj": traj, "trial": 0} for i in range(3)
    ]
    runs.append({"task_id": 9, "reward": 0.0, "info": {}, "traj": traj[:2], "trial": 1})
    raw = json.dumps(runs, indent=indent).encode()
    split = split_collection(raw)
    assert split is not None and split.format == "taubench_runs" and len(split.parts) == 4
    out, report = round_trip(raw, tmp_path, "runs.json")
    assert report.format == "taubench_runs" and report.messages == 3 * len(traj) + 2
    after = json.loads(out)
    assert [r["task_id"] for r in after] == [0, 1, 2, 9]
    for run in after[:3]:
        assert tool_lengths(run["traj"]) < tool_lengths(traj)
    assert after[3] == runs[3]
    assert out == json.dumps(after, indent=indent).encode()


def _tau_runs(n: int) -> bytes:
    traj = tau_messages()
    runs = [{"task_id": i, "reward": 1.0, "traj": traj, "trial": 0} for i in range(n)]
    return json.dumps(runs, indent=2).encode()


@needs_shared
def test_a_collection_is_reduced_a_batch_of_parts_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A 100 MB tau-bench file peaked at 1.25 GB while every run was held parsed at once.
    raw = _tau_runs(5)
    whole = reduce_bytes(raw, config=TIGHT)
    monkeypatch.setattr(reducer, "PART_BATCH_BYTES", 1)  # one part per batch
    loaded: list[weakref.ref[Document]] = []
    held: list[int] = []
    real_load = reducer.load

    def load(raw: bytes, path: str, **kw: Any) -> Document:
        gc.collect()
        held.append(sum(ref() is not None for ref in loaded))
        doc = real_load(raw, path, **kw)
        loaded.append(weakref.ref(doc))
        return doc

    monkeypatch.setattr(reducer, "load", load)
    batched = reduce_bytes(raw, config=TIGHT)
    assert held == [0] * 5  # no earlier part outlives its batch
    assert batched.output == whole.output and batched.script == whole.script
    assert batched.report.to_dict() == whole.report.to_dict()


@needs_shared
def test_a_report_follows_the_only_trajectory_of_a_collection() -> None:
    one = reduce_bytes(_tau_runs(1), config=TIGHT, options=RunOptions(trace=True))
    assert one.trace is not None and one.report.format == "taubench_runs"
    assert one.trace.steps[0][1].messages  # the run's messages, as ctx report shows them
    with pytest.raises(TranscriptError, match="holds 3 trajectories"):
        reduce_bytes(_tau_runs(3), config=TIGHT, options=RunOptions(trace=True))


# -- OpenHands ---------------------------------------------------------------------------


def openhands_instance(n: int, output: str) -> dict[str, Any]:
    events: list[dict[str, Any]] = [
        {
            "id": 0,
            "source": "agent",
            "action": "system",
            "message": "sys",
            "args": {"content": "You are OpenHands.", "tools": [{"type": "function"}]},
        },
        {
            "id": 1,
            "source": "user",
            "action": "message",
            "message": "fix it",
            "args": {"content": "Fix the failing test.", "image_urls": None},
        },
        {"id": 2, "source": "user", "action": "recall", "args": {"query": "fix"}},
        {
            "id": 3,
            "source": "environment",
            "observation": "recall",
            "content": "",
            "cause": 2,
            "extras": {},
        },
    ]
    for i in range(n):
        call = {
            "function_name": "execute_bash",
            "tool_call_id": f"toolu_{i}",
            "model_response": {"id": f"r{i}"},
            "total_calls_in_response": 1,
        }
        events.append(
            {
                "id": 10 + 2 * i,
                "source": "agent",
                "action": "run",
                "message": "Running command: pytest",
                "args": {"command": "pytest", "thought": f"step {i}"},
                "tool_call_metadata": call,
            }
        )
        events.append(
            {
                "id": 11 + 2 * i,
                "source": "agent",
                "observation": "run",
                "content": output,
                "extras": {"exit_code": 1},
                "cause": 10 + 2 * i,
                "tool_call_metadata": call,
            }
        )
    events.append(
        {
            "id": 99,
            "source": "agent",
            "observation": "error",
            "content": "bad args: command is required",
            "cause": None,
            "extras": {},
            "tool_call_metadata": {
                "function_name": "str_replace_editor",
                "tool_call_id": f"toolu_{n - 1}",
            },
        }
    )
    return {
        "instance_id": f"repo__{n}",
        "instruction": "fix",
        "history": events,
        "test_result": {"git_patch": "diff"},
        "metrics": {"cost": 0.1},
        "error": None,
    }


def test_openhands_output_each_instance_reduced(tmp_path: Path) -> None:
    long = "\n".join(f"FAILED tests/test_x.py::test_{i} - AssertionError" for i in range(200))
    rows = [openhands_instance(3, long), openhands_instance(1, "ok"), openhands_instance(2, long)]
    raw = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    out, report = round_trip(raw, tmp_path, "output.jsonl")
    assert report.format == "openhands_output"
    lines = out.splitlines(keepends=True)
    assert lines[1] == raw.splitlines(keepends=True)[1]  # nothing to cut: the same bytes
    for line, row in zip(lines, rows, strict=True):
        after = json.loads(line)
        assert {k: v for k, v in after.items() if k != "history"} == {
            k: v for k, v in row.items() if k != "history"
        }
        assert [e["id"] for e in after["history"]] == [e["id"] for e in row["history"]]
    first = json.loads(lines[0])["history"]
    assert all(len(e["content"]) < 1500 for e in first if e.get("observation") == "run")
    assert first[-1]["content"] == rows[0]["history"][-1]["content"]  # short enough: kept


def test_openhands_events_link_by_tool_call_id() -> None:
    from ctxcli.core.model import Kind
    from ctxcli.formats import load

    events = openhands_instance(2, "out")["history"]
    raw = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    conv = load(raw).conversation
    assert conv.format == "openhands"
    assert [m.role for m in conv] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
    ]
    calls = [b for _, b in conv.iter_blocks(Kind.TOOL_CALL)]
    assert [b.name for b in calls] == ["execute_bash", "execute_bash"]
    assert all(conv.call_of(ref) is not None for ref, _ in conv.iter_blocks(Kind.TOOL_RESULT))


# -- rows with a messages column ---------------------------------------------------------


@needs_shared
def test_jsonl_rows_with_a_messages_column(tmp_path: Path) -> None:
    traj = tau_messages()
    rows = [{"id": f"run-{i}", "messages": traj, "split": "test"} for i in range(3)]
    rows.append({"id": "short", "messages": traj[:1], "split": "test"})
    raw = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows)
    out, report = round_trip(raw, tmp_path, "rows.jsonl")
    assert report.format == "jsonl_rows" and report.tokens_after < report.tokens_before
    after = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in after] == [r["id"] for r in rows]
    assert all(tool_lengths(r["messages"]) < tool_lengths(traj) for r in after[:3])
    assert out.splitlines()[3] == raw.splitlines()[3]


def test_collections_leave_single_transcripts_alone() -> None:
    one = b'{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n'
    assert split_collection(one) is None
    assert reduce_bytes(one, config=TIGHT).report.format == "openai_chat"
    doc = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    assert split_collection(doc) is None


def test_forced_collection_that_does_not_match_is_one_line_error() -> None:
    with pytest.raises(TranscriptError, match="x.json: not a taubench_runs file"):
        split_collection(b'[{"role": "user"}]', "x.json", format="taubench_runs")
    bad = b'{"messages": [{"role": "user", "content": "a"}]}\n{"other": 1}\n'
    with pytest.raises(TranscriptError, match="rows.jsonl:2: not a jsonl_rows row"):
        split_collection(bad, "rows.jsonl")


def test_validate_checks_each_trajectory_of_a_collection() -> None:
    from ctxcli.formats.validate import validate_bytes

    rows = [openhands_instance(2, "out"), openhands_instance(2, "out")]
    raw = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    assert validate_bytes(raw, "output.jsonl") == []
    del rows[1]["history"][5]  # the first run observation of the second instance
    raw = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    (problem,) = validate_bytes(raw, "output.jsonl")
    assert problem.render("output.jsonl") == (
        "output.jsonl: line 2, message 5: tool call 'toolu_0' (execute_bash) has no result"
    )


@needs_shared
def test_trajectory_objects_as_dataset_cells() -> None:
    """A row holding a whole tau-bench run or OpenHands instance reduces like its file."""
    from ctxcli.datasets.rows import reduce_row, restore_row

    run = {"task_id": 3, "reward": 1.0, "traj": tau_messages()}
    for cell, fmt in ((run, "jsonl_rows"), (openhands_instance(2, "x" * 3000), "openhands_output")):
        out = reduce_row(cell, TIGHT)
        assert out.stats["format"] == fmt
        assert out.stats["tokens_after"] < out.stats["tokens_before"]
        assert restore_row(out.value, out.restore, out.blobs) == cell


@needs_shared
def test_one_line_document_stays_a_document() -> None:
    """A compact mini-swe-agent file is one line with a messages list: still json_doc."""
    compact = json.dumps(json.loads(MINI.read_bytes())).encode()
    assert split_collection(compact) is None
    assert reduce_bytes(compact, config=TIGHT).report.format == "json_doc"


# -- finding a collection's items in bytes ---------------------------------------------------

_tricky = st.text(alphabet=st.sampled_from('ab"\\[]{},: \n\té😀'), max_size=8)
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | _tricky,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky, inner, max_size=3),
    max_leaves=10,
)
_items = st.lists(
    st.dictionaries(_tricky, _values, max_size=3) | st.lists(_values, max_size=3), max_size=5
)


@settings(max_examples=200, deadline=None)
@given(items=_items, indent=st.sampled_from([None, 1, 2, "\t"]), ascii=st.booleans())
def test_array_items_finds_what_the_text_scanner_finds(
    items: list[Any], indent: int | str | None, ascii: bool
) -> None:
    text = "\n " + json.dumps(items, indent=indent, ensure_ascii=ascii) + "\n"
    raw = text.encode()
    start = raw.index(b"[")
    found = array_items(raw, start)
    assert found is not None
    spans, seps = item_spans(text, text.index("["))
    assert [raw[s:e].decode() for s, e in found[0]] == [text[s:e] for s, e in spans]
    assert [sep.decode() for sep in found[1]] == seps
    # Any shorter cut is not a whole array: refused, never a crash.
    for cut in range(start + 1, len(raw.rstrip())):
        assert array_items(raw[:cut], start) is None
