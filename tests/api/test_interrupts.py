"""Ctrl-C at every step of writing the output leaves nothing behind.

``test_ctrl_c_exits_130_and_cleans_up`` (tests/api/test_reliability.py) interrupts a real
process at a few moments and failed about one run in five: a ``.out.jsonl.ctx-tmp-*``
file stayed when SIGINT landed right after the output's temporary file was created. Here
the interrupt is raised deterministically at every line the write path executes, one run
per line (Python delivers a signal's KeyboardInterrupt between bytecodes; a line is the
step at which a trace function can raise it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import ctxcli.api as api
import ctxcli.api.commit as commit
import ctxcli.store.disk as disk
import ctxcli.store.inplace as inplace

# The functions that create, fill, rename and clean up the output's temporary file and the
# offload directory's staging directory, by module.
WRITE_PATH = {
    os.path.realpath(commit.__file__): {"reduce_and_commit", "_commit"},
    os.path.realpath(inplace.__file__): {"open", "close", "replace", "discard", "_name"},
    os.path.realpath(disk.__file__): {"__init__"},
}
CONFIG = 'tokenizer = "approx"\n\n[[stages]]\nuse = "truncate_tool_output"\nmax_length = 500\n'


def _transcript(path: Path) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
    records = [
        {"role": "user", "content": "read the log"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "log line\n" * 400},
        {"role": "assistant", "content": "done"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


class _InterruptAt:
    """A trace function raising KeyboardInterrupt at the n-th line of the write path."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if self.seen > self.n or code.co_name not in WRITE_PATH.get(code.co_filename, ()):
            return None
        return self._line

    def _line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line" and self.seen <= self.n:
            self.seen += 1
            if self.seen > self.n:
                raise KeyboardInterrupt
        return self._line if self.seen <= self.n else None


def _run(n: int, source: Path) -> bool:
    """Reduce with an interrupt at line ``n``; True if it was interrupted."""
    trace = _InterruptAt(n)
    sys.settrace(trace)
    try:
        api.reduce(source, api.Destination("out.jsonl", stream=True))
    except KeyboardInterrupt:
        return True
    finally:
        sys.settrace(None)
    return False


# A line can also be one that closes a file on the way out of a `with`: an interrupt there
# leaves the descriptor to the garbage collector, harmless in a process that is ending.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_anywhere_in_the_write_path_leaves_no_temporary_file(
    tmp_path: Path,
) -> None:
    source = tmp_path / "in.jsonl"
    _transcript(source)
    Path("ctx.toml").write_text(CONFIG)
    interrupted = 0
    for n in range(400):
        if not _run(n, source):
            break  # the run got past its last line: every step was interrupted once
        interrupted += 1
        leftovers = [p.name for p in Path.cwd().iterdir() if "ctx-tmp" in p.name]
        assert leftovers == [], (n, leftovers)
        out = Path("out.jsonl")
        if out.exists():  # interrupted after the output's rename: a complete pair
            assert api.restore_file(out) == source.read_bytes(), n
            out.unlink()
            api.write_atomic(Path("x"), b"")  # and a later run sweeps nothing of ours
    assert interrupted > 40, "the write path was not traced"
