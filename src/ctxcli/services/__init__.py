"""Services a stage may be handed: token counters and caches, the Anthropic client, classifier, summarizer."""

__all__: list[str] = []
