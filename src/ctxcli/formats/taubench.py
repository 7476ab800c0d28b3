"""tau-bench results: a JSON array of runs ``[{task_id, reward, info, traj, trial}, ...]``.

Each run's ``traj`` is an OpenAI chat transcript (tool call ids are reused within a run,
so results are linked by position as for any chat transcript). Every run is reduced on
its own; the array is written back in the file's own style (indent, ASCII escapes), runs
nothing changed in keep their exact text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ctxcli.core.io import Input, Pages, release
from ctxcli.core.protocols import encode_text
from ctxcli.formats.collection import (
    Collection,
    Part,
    Split,
    first_value,
    items_of,
    part_bytes,
    row_id_of,
)
from ctxcli.formats.json_doc import layout_from
from ctxcli.formats.jsontext import array_items, loads_record
from ctxcli.formats.lines import BOM, join_parts

__all__ = ["TRAJ", "TauBenchRuns"]

TRAJ = "traj"
_NON_SPACE = re.compile(rb"\S")
_NON_ASCII = re.compile(rb"[\x80-\xff]")
_HEAD = 256
"""Bytes of an item read to find its indentation."""


def _is_run(run: Any) -> bool:
    traj = run.get(TRAJ) if isinstance(run, dict) else None
    return (
        isinstance(traj, list)
        and bool(traj)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in traj)
    )


class TauBenchRuns(Collection):
    """A tau-bench results array; each run's ``traj`` is reduced.

    The file is never parsed as one value nor decoded as one string: the runs are
    found by their structure, parsed one at a time to check them, and parsed again
    when their part is reduced (a 100 MB file peaked at 1.25 GB when it was).
    """

    name = "taubench_runs"
    description = "tau-bench results: a JSON array of runs [{task_id, traj: [messages]}, ...]"

    def split(self, raw: Input, path: str) -> Split | None:
        """Split a tau-bench results array into its runs (None: not one)."""
        start = first_value(raw)
        if start < 0 or raw[start : start + 1] != b"[":
            return None
        lead = BOM if raw[:3] == BOM else b""
        found = array_items(raw, start, Pages(raw).reached)  # pages go back as it scans
        if found is None or not found[0]:
            return None
        spans, seps = found
        end = spans[-1][1] + len(seps[-1]) + 1
        if _NON_SPACE.search(raw, end) is not None:
            return None
        view = memoryview(raw)
        pages = Pages(raw)  # each run is parsed again as a part: its pages go back
        ascii_doc = True  # between the runs there are only blanks and commas
        ids: list[str | None] = []
        try:
            for s, e in spans:
                run = loads_record(view[s:e])
                if not _is_run(run):
                    return None
                ids.append(row_id_of(run))
                ascii_doc = ascii_doc and _NON_ASCII.search(raw, s, e) is None
                pages.reached(e)
            head = bytes(raw[len(lead) : start]).decode("utf-8")
            tail = bytes(raw[end:]).decode("utf-8")
            layout = layout_from(
                lead,
                head,
                tail,
                [sep.decode("ascii") for sep in seps],
                (bytes(view[s : min(e, s + _HEAD)]).decode("utf-8", "ignore") for s, e in spans),
                ascii_doc and head.isascii() and tail.isascii(),
                bytes(view[spans[0][0] : spans[0][1]]),
            )
        except (ValueError, RecursionError):
            return None
        finally:
            release(raw)
        parts = [
            Part(_run_part(view, s, e), f"{path}[{i}].traj", f"run {i}", ids[i])
            for i, (s, e) in enumerate(spans)
        ]

        def join(outputs: list[bytes | None]) -> bytes:
            out: list[bytes | memoryview] = [lead, encode_text(head), b"[", seps[0]]
            pages = Pages(raw)  # the runs parsed again go back
            for (s, e), sep, reduced in zip(spans, seps[1:], outputs, strict=True):
                if reduced is None:
                    out.append(view[s:e])
                else:
                    run = loads_record(view[s:e])
                    out.append(encode_text(layout.dump_item({**run, TRAJ: items_of(reduced)})))
                    pages.reached(e)
                out.append(sep)
            out += [b"]", encode_text(tail)]
            return join_parts(out)

        return Split(self.name, parts, join)


def _run_part(view: memoryview, start: int, end: int) -> Callable[[], bytes]:
    """A run's ``traj`` as JSONL, parsed again from the run's bytes on each call."""
    return lambda: part_bytes(loads_record(view[start:end])[TRAJ])
