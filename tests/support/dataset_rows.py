"""Datasets of real trajectories for the dataset tests (rows built from ../shared)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.paths import SHARED

TAU = SHARED / "oai_taubench_airline_task2_trial1.jsonl"
# Whole files of several formats, for a text column (one JSON document or JSONL per row).
TEXT_FILES = [
    "sweagent_marshmallow-1867_fc.traj",
    "minisweagent_sqlfluff-1733_deepseek-chat.traj.json",
    "cc_spotter_4d5611e5_subagent_a2898e3.jsonl",
    "codex_agentcmd_2025-09-25T08-02-05.jsonl",
    "oai_taubench_airline_task2_trial1.jsonl",
]
CONFIG = {
    "stages": [
        {"use": "truncate_tool_output", "max_chars": 400},
        {"use": "clear_tool_results", "max_tokens": 3000},
    ]
}


def message_rows(n: int) -> list[dict[str, Any]]:
    """``n`` tau-bench trajectories with varied ids (the first user turn names the row)."""
    msgs = [json.loads(line) for line in TAU.read_bytes().splitlines()]
    rows = []
    for i in range(n):
        first = {**msgs[0], "content": f"{msgs[0]['content']}\n[run {i}]"}
        # Every third row is cut short, so rows differ in length too.
        traj = [first, *msgs[1:]] if i % 3 else [first, *msgs[1:20]]
        rows.append({"id": f"tau-{i}", "messages": traj})
    return rows


def text_rows() -> list[dict[str, Any]]:
    """Real files of several formats as text, twice each."""
    return [
        {"id": f"{name}-{k}", "trajectory": (SHARED / name).read_text("utf-8")}
        for k in range(2)
        for name in TEXT_FILES
    ]


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
