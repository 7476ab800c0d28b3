"""How a run goes: the one options object of every route (reduce, stats, report, batches).

:class:`RunOptions` is what black's ``Mode`` is to black: every switch of a run in one
frozen value, made once at the command line's boundary (or by a Python caller) and handed
down unchanged. :func:`~ctxcli.pipeline.compose.reduce_bytes` takes it, so does every route
of :mod:`ctxcli.api` (which re-exports it) and the batches of :mod:`ctxcli.api.batch`;
each reads the fields it needs and none restates them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ctxcli.core.errors import DEFAULT_ON_INVALID, OnInvalid
from ctxcli.services.tokens.ledger import CountOptions
from ctxcli.store.inplace import DEFAULT_LIVE_SECONDS

__all__ = ["RunOptions"]


@dataclass(frozen=True)
class RunOptions:
    """How a run goes (what it runs is the :class:`~ctxcli.pipeline.config.Config`).

    Attributes:
        on_invalid: what a line that is not JSON does; the default is the one of
            ``reduce``, ``stats`` and ``report`` (see :data:`~ctxcli.core.errors.DEFAULT_ON_INVALID`).
        force: write beside an offload directory that holds another transcript's record;
            change a session even if it looks in use.
        counting: the count cache and the processes that count one large input.
        incremental: a file that grew from the one an output was made from keeps that
            run's decisions for the prefix (the output is the same either way).
        live_seconds: a session written to more recently than this looks in use.
        log: receives the stages' notes meant for the user (default: the warnings).
        monitors: compute the six stuck-agent scores for the report of
            :func:`~ctxcli.pipeline.compose.reduce_bytes` (``stats`` always does and
            ``reduce`` never does: on large logs they are a quarter of a run).
        trace: keep the conversation after every stage and the tokens of every block
            (``PipelineResult.trace``: what ``ctx report`` draws).
        jobs: files handled at once by a batch, each on a process of its own when more
            than one (those processes then count on one core each).
        allow_empty: a directory holding no transcript file is not an error (batches).
    """

    on_invalid: OnInvalid = DEFAULT_ON_INVALID
    force: bool = False
    counting: CountOptions = field(default_factory=CountOptions)
    incremental: bool = True
    live_seconds: int = DEFAULT_LIVE_SECONDS
    log: Callable[[str], None] | None = field(default=None, compare=False)
    monitors: bool = True
    trace: bool = False
    jobs: int = 1
    allow_empty: bool = False

    def __post_init__(self) -> None:
        # The one check of a value a caller without type checking hands in.
        object.__setattr__(self, "on_invalid", OnInvalid.of(self.on_invalid))
