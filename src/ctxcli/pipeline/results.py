"""The report of one reduction: a library object the CLI only renders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctxcli.core.model import Block, Conversation
from ctxcli.pipeline.run import StageReport

__all__ = ["PipelineResult", "Report", "Trace"]


@dataclass
class Report:
    """Everything ``ctx stats`` shows and ``ctx reduce --json`` prints."""

    input: str
    format: str
    tokenizer: str
    messages: int
    tokens_before: int
    tokens_after: int
    bytes_before: int
    bytes_after: int
    stages: list[StageReport]
    offload_dir: str | None = None
    output: str | None = None
    warnings: list[str] = field(default_factory=list)
    monitors: dict[str, float] = field(default_factory=dict)
    """The six stuck-agent scores of the input (see :mod:`ctxcli.core.monitors`); ``ctx stats``
    fills them, ``ctx reduce`` leaves them empty."""
    resume_tokens_before: int | None = None
    """Tokens a resumed session sends again (after the last compaction boundary);
    None for formats that are not resumed from their file."""
    resume_tokens_after: int | None = None
    kept_lines: int = 0
    """Leading lines whose reduction an incremental re-run took from the previous run
    (the rest was parsed and reduced; the stages' counters cover only that rest)."""

    @property
    def changed(self) -> bool:
        """True if any stage changed the transcript."""
        return any(s.changed for s in self.stages)

    @property
    def fallbacks(self) -> list[tuple[str, str]]:
        """``(stage, reason)`` for every stage that fell back (a strict run fails on any)."""
        return [(s.stage, reason) for s in self.stages for reason in s.fallbacks]

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape (keys named in the README)."""
        return {
            "input": self.input,
            "format": self.format,
            "tokenizer": self.tokenizer,
            "messages": self.messages,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "stages": [s.to_dict() for s in self.stages],
            "offload_dir": self.offload_dir,
            "output": self.output,
            "warnings": list(self.warnings),
            "monitors": dict(self.monitors),
            "resume_tokens_before": self.resume_tokens_before,
            "resume_tokens_after": self.resume_tokens_after,
            "kept_lines": self.kept_lines,
        }


@dataclass
class Trace:
    """What a reduction went through, for ``ctx report``: more than the totals.

    ``steps`` holds ``("input", conversation)`` and then ``(stage, conversation after
    it)`` for every stage; ``block_tokens`` the tokens of every block of those
    conversations, keyed by ``id(block)`` (the steps keep the blocks alive), counted
    by the run's tokenizer so they add up to the report's totals.
    """

    steps: list[tuple[str, Conversation]]
    block_tokens: dict[int, int]

    def tokens(self, block: Block) -> int:
        """Tokens of a block of one of the steps."""
        return self.block_tokens[id(block)]


@dataclass(frozen=True)
class Written:
    """An output written to a file as it was made, never held (``reduce_bytes(into=)``)."""

    size: int
    sha256: str


@dataclass
class PipelineResult:
    """The outcome of reducing bytes in memory."""

    output: bytes
    """The reduced bytes; empty when they went to a file (see :attr:`written`)."""
    report: Report
    script: list[Any]
    units: str
    trace: Trace | None = None
    """Filled when ``RunOptions(trace=True)``."""
    rerun: dict[str, Any] | None = None
    """What the next run of a grown transcript may keep (the manifest's ``rerun``),
    filled by :func:`~ctxcli.pipeline.compose.rerun_bytes` when the chain allows it."""
    written: Written | None = None
    """Set when ``reduce_bytes(..., into=f)`` wrote the output to ``f``."""
