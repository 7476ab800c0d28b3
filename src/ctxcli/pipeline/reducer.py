"""The composition root: bytes in, reduced bytes and a report out, nothing written.

``reduce_bytes`` parses a transcript with its format, opens the token counter, builds the
stage context (counter, offload store, services) and runs the chain; the format then writes
the reduced transcript back. Everything above (files, batches, rows) calls this.
"""

from __future__ import annotations

from collections.abc import Callable

from ctxcli.core.model import Conversation
from ctxcli.core.monitors import conversation_monitors
from ctxcli.formats import load
from ctxcli.pipeline.config import Config, load_config
from ctxcli.pipeline.offload import DryRunOffload
from ctxcli.pipeline.report import Reduced, Report, Trace
from ctxcli.pipeline.run import run_pipeline
from ctxcli.services.classifier import default_services
from ctxcli.services.counters import open_counter
from ctxcli.services.tokens import CountOptions, TokenCounter, block_tokens
from ctxcli.stages import StageContext, TokenLedger

__all__ = ["reduce_bytes"]


def reduce_bytes(
    raw: bytes,
    *,
    config: Config | None = None,
    offload: DryRunOffload | None = None,
    path: str = "<stdin>",
    on_invalid: str = "auto",
    log: Callable[[str], None] | None = None,
    counting: CountOptions | None = None,
    monitors: bool = True,
    trace: bool = False,
) -> Reduced:
    """Reduce a transcript held in memory.

    With the default ``offload`` (a dry run) nothing is written: this is what
    ``ctx stats`` runs. Pass an :class:`~ctxcli.pipeline.offload.OffloadStore` to keep the
    removed texts. ``counting`` says whether to use the count cache and how many
    processes may count (default: the cache and every core, for large inputs).
    ``monitors`` computes the six stuck-agent scores for the report (``ctx stats``
    shows them; ``ctx reduce`` skips them: on large logs they are a quarter of a run).
    ``trace`` keeps the conversation after every stage and the tokens of every block
    in ``Reduced.trace`` (``ctx report``).

    Example::

        >>> from ctxcli.api import reduce_bytes
        >>> line = b'{"role": "user", "content": "hi"}\\n'
        >>> reduce_bytes(line).output == line
        True
    """
    config = config or load_config()
    offload = offload if offload is not None else DryRunOffload("ctx-offload")
    doc = load(raw, path, format=config.settings.format, on_invalid=on_invalid)
    counting = counting or CountOptions()
    cache_notes: list[str] = []
    counter = open_counter(config.settings.tokenizer, counting, cache_notes.append)
    try:
        ledger = TokenLedger(counter)
        # Count every text up front, in bulk: the stats need them all, and in bulk
        # they come from the disk cache or from every core.
        ledger.prime(doc.conversation, counting.progress)
        # Stage notes meant for the user (a classifier falling back) become warnings.
        ctx = StageContext(
            ledger,
            offload,
            config.settings.language,
            log or cache_notes.append,
            services=default_services(cache=counting.cache),
        )
        steps: list[tuple[str, Conversation]] | None = (
            [("input", doc.conversation)] if trace else None
        )
        conv, reports = run_pipeline(doc.conversation, config.stages, ctx, trace=steps)
        counter.finish()
        kept = Trace(steps, _block_tokens(counter, steps)) if steps is not None else None
    finally:
        counter.close()
    output, script = doc.format.dump(doc, conv, offload)
    report = Report(
        input=path,
        format=doc.format.name,
        tokenizer=config.settings.tokenizer,
        messages=len(doc.conversation),
        tokens_before=ledger.total(doc.conversation),
        tokens_after=ledger.total(conv),
        bytes_before=len(raw),
        bytes_after=len(output),
        stages=reports,
        offload_dir=offload.root,
        warnings=list(doc.warnings) + cache_notes,
        monitors=conversation_monitors(doc.conversation) if monitors else {},
    )
    if doc.conversation.resume_start is not None:
        report.resume_tokens_before = _resume_tokens(ledger, doc.conversation)
        report.resume_tokens_after = _resume_tokens(ledger, conv)
    return Reduced(output, report, script.ops, doc.format.units, kept)


def _block_tokens(counter: TokenCounter, steps: list[tuple[str, Conversation]]) -> dict[int, int]:
    """Tokens of every distinct block of ``steps`` (unchanged blocks are shared objects)."""
    tokens: dict[int, int] = {}
    for _name, conv in steps:
        for msg in conv.messages:
            for block in msg.blocks:
                if id(block) not in tokens:
                    tokens[id(block)] = block_tokens(counter, block)
    return tokens


def _resume_tokens(ledger: TokenLedger, conv: Conversation) -> int:
    """Model-visible tokens a resume sends again: those after the last compaction."""
    return sum(ledger.message(m) for m in conv.resumed_messages())
