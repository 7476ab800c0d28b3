"""The one factory of the context every stage gets, on every route.

A file (:func:`~ctxcli.pipeline.compose.reduce_bytes`), the live
:class:`~ctxcli.agent.reducer.Reducer` and :func:`ctxcli.testing.run_stage` all build
their :class:`~ctxcli.stages.StageContext` here, so a stage that asks a model finds the
same API access and the same answer cache whichever route runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ctxcli.core.protocols import Offload
from ctxcli.services.answer_cache import AnswerCache
from ctxcli.services.anthropic_client import AnthropicAccess
from ctxcli.services.dirs import cache_dir
from ctxcli.services.tokens.count_cache import cache_disabled
from ctxcli.stages import StageContext, TokenLedger

if TYPE_CHECKING:
    from ctxcli.services.classifier import Classifier
    from ctxcli.services.summarizer import Summarizer

__all__ = ["stage_context"]


def _ignore(_message: str) -> None:
    """A log that keeps nothing."""


def stage_context(
    tokens: TokenLedger,
    offload: Offload,
    *,
    language: str = "en",
    log: Callable[[str], None] | None = None,
    cache: bool = True,
    classifier: Classifier | None = None,
    summarizer: Summarizer | None = None,
) -> StageContext:
    """What a stage gets: the counter, the offload store and the services.

    API access comes from the environment (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``);
    the answer cache sits beside the token-count cache (``$CTX_CACHE_DIR``, else
    ``~/.cache/ctx``) and is off with ``cache=False`` (``--no-cache``) or when
    ``CTX_NO_CACHE`` is set. ``classifier`` and ``summarizer``, when given, are used
    instead of the ones the stages' options name.
    """
    answers = AnswerCache(cache_dir()) if cache and not cache_disabled() else None
    return StageContext(
        tokens,
        offload,
        language,
        log if log is not None else _ignore,
        anthropic=AnthropicAccess.from_env(),  # read when the run starts
        answers=answers,
        classifier=classifier,
        summarizer=summarizer,
    )
