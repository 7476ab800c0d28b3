"""tau-bench results: a JSON array of runs ``[{task_id, reward, info, traj, trial}, ...]``.

Each run's ``traj`` is an OpenAI chat transcript (tool call ids are reused within a run,
so results are linked by position as for any chat transcript). Every run is reduced on
its own; the array is written back in the file's own style (indent, ASCII escapes), runs
nothing changed in keep their exact text.
"""

from __future__ import annotations

from typing import Any

from ctxcli.core.restore import encode_text
from ctxcli.formats.base import BOM, Input, loads_record
from ctxcli.formats.collection import (
    Collection,
    Part,
    Split,
    first_value,
    items_of,
    part_bytes,
)
from ctxcli.formats.json_doc import item_spans, layout_of, skip_ws

TRAJ = "traj"


def _is_run(run: Any) -> bool:
    traj = run.get(TRAJ) if isinstance(run, dict) else None
    return (
        isinstance(traj, list)
        and bool(traj)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in traj)
    )


class TauBenchRuns(Collection):
    """A tau-bench results array; each run's ``traj`` is reduced."""

    name = "taubench_runs"
    description = "tau-bench results: a JSON array of runs [{task_id, traj: [messages]}, ...]"

    def split(self, raw: Input, path: str) -> Split | None:
        start = first_value(raw)
        if start < 0 or raw[start : start + 1] != b"[":
            return None
        lead = BOM if raw[:3] == BOM else b""
        body = raw[len(lead) :]
        try:
            runs = loads_record(body)
            text = body.decode("utf-8")
        except (ValueError, RecursionError):
            return None
        if not isinstance(runs, list) or not runs or not all(_is_run(r) for r in runs):
            return None
        start = skip_ws(text, 0)
        spans, seps = item_spans(text, start)
        items = [text[s:e] for s, e in spans]
        end = spans[-1][1] + len(seps[-1]) + 1
        layout = layout_of(text, lead, start, end, seps, items)
        parts = [
            Part(part_bytes(run[TRAJ]), f"{path}[{i}].traj", f"run {i}")
            for i, run in enumerate(runs)
        ]

        def join(outputs: list[bytes | None]) -> bytes:
            new = [
                item if out is None else layout.dump_item({**run, TRAJ: items_of(out)})
                for item, run, out in zip(items, runs, outputs, strict=True)
            ]
            return lead + encode_text(layout.head + layout.join(new, True) + layout.tail)

        return Split(self.name, parts, join)
