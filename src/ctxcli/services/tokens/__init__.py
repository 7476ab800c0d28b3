"""Token counting, in named parts; import each from its module.

- :mod:`~ctxcli.services.tokens.engines`: the tokenizers (cl100k, o200k offline; approx).
- :mod:`~ctxcli.services.tokens.ledger`: what a counter is, which texts of a message the
  model reads, and :class:`~ctxcli.services.tokens.ledger.TokenLedger`, a run's memo of
  tokens per message that stages read through their context.
- :mod:`~ctxcli.services.tokens.bulk`: :class:`~ctxcli.services.tokens.bulk.CachedCounter`,
  counting many texts once each, from the disk cache, on every core.
- :mod:`~ctxcli.services.tokens.count_cache`: the on-disk cache of counts (``token-counts.sqlite3``).
- :mod:`~ctxcli.services.tokens.anthropic_api`: exact Claude counts from the Anthropic API.
- :mod:`~ctxcli.services.tokens.by_name`: a counter by the ``tokenizer`` setting's name.

The package itself imports nothing, so importing one part loads only what that part needs.
"""

__all__: list[str] = []
