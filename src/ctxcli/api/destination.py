"""What a library call is asked: where the result goes, and how the run goes.

Two frozen objects carry what used to be a dozen keyword switches (as black's ``Mode``
and ``WriteBack`` do): a :class:`Destination` says where the reduced transcript and its
offload directory go — stdout, a file, a URL, or the input itself — and
:class:`RunOptions` how the run behaves (it lives in the pipeline layer, which takes it
too, and is re-exported here). The front door (:mod:`ctxcli.api`) takes both
and picks the route; ``stats`` and ``report`` take the same destination, so a preview
names the offload directory the reduction will write.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ctxcli.api.local import STDIO
from ctxcli.core.io import is_url, local_path
from ctxcli.pipeline.options import RunOptions
from ctxcli.pipeline.results import Report
from ctxcli.store.inplace import Change

__all__ = ["Destination", "Reduction", "RunOptions"]


def _location(value: str | os.PathLike[str] | None) -> str | None:
    """A path or URL as text; a ``file://`` URL is the local path it names."""
    if value is None:
        return None
    text = os.fspath(value)
    local = local_path(text)
    return local if local is not None else text


@dataclass(frozen=True)
class Destination:
    """Where a reduction's output and its offload directory go.

    Attributes:
        output: a file path or URL; ``None`` or ``"-"`` for stdout (the bytes are
            returned, or handed to ``write``).
        offload_dir: where removed text goes (default: ``OUTPUT.offload``; for stdout
            ``./ctx-offload/<hash of the input>``; in place, see ``in_place``).
        in_place: replace the input itself. A Claude Code or Codex session keeps its
            change records in ctx's data directory (the hints cite them there); any
            other file (or any file given an ``offload_dir``) keeps them beside it.
        stream: a file output is written as it is made, never held whole (the bytes
            returned are then empty).
        write: for stdout, called with the output before the offload directory is
            committed, so a reader that fails leaves no orphan offload.
        cite_as: the offload directory the hints name when it is not where the files
            are written (an upload to object storage follows).
    """

    output: str | None = None
    offload_dir: str | None = None
    in_place: bool = False
    stream: bool = False
    write: Callable[[bytes], None] | None = field(default=None, compare=False)
    cite_as: str | None = None

    def __post_init__(self) -> None:
        # Paths are accepted as given; file:// URLs are their local path from here on.
        output = _location(self.output)
        object.__setattr__(self, "output", None if output == STDIO else output)
        object.__setattr__(self, "offload_dir", _location(self.offload_dir))

    @property
    def remote(self) -> bool:
        """The output or the offload directory is in object storage."""
        return is_url(self.output) or is_url(self.offload_dir)


@dataclass
class Reduction:
    """What a reduction did.

    Attributes:
        report: the numbers (what ``ctx stats`` previews).
        output: the reduced bytes (empty when written to a file as made).
        change: for an in-place run, the change made (``change.record`` is None when the
            file was already what the chain makes).
        session: the file was a client's session (its record is in ctx's data directory).
        no_gain: in place, the reduction gained nothing worth writing (a resume would
            send more tokens, and the file would not shrink by half), so the file was
            left as it is (``change.record`` is None).
        moved: why the record is not in the directory asked for (it is beside it).
        size_only: in place, written for the file's size alone: it shrank to half or
            less (a client loads it faster) while a resume sends no fewer tokens.
    """

    report: Report
    output: bytes = b""
    change: Change | None = None
    session: bool = False
    no_gain: bool = False
    moved: str | None = None
    size_only: bool = False
