"""Agent-loop integrations: the in-process Reducer and the framework middlewares built on it."""

__all__: list[str] = []
