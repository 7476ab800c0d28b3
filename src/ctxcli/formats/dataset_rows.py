"""JSONL datasets with one trajectory per row, held in a ``messages`` column.

Training and evaluation sets are often written as JSONL rows such as
``{"id": ..., "messages": [{"role": ..., "content": ...}, ...], "label": ...}``. Each
row's message list (``messages``, ``conversation``, ``conversations`` or a tau-bench
``traj``) is reduced on its own as an OpenAI chat or Anthropic transcript; the other
fields are kept. Another column name: reduce the rows through :mod:`ctxcli.datasets.rows`
(``column=`` in the dataset integrations).
"""

from __future__ import annotations

from typing import Any

from ctxcli.formats.collection import JsonlRows

__all__ = ["MessageRows"]


class MessageRows(JsonlRows):
    """JSONL rows, each holding a list of ``{role, ...}`` messages."""

    name = "jsonl_rows"
    description = 'JSONL dataset rows holding a list of messages: {"messages": [...], ...}'
    columns = ("messages", "conversation", "conversations", "traj")

    def accept_item(self, item: dict[str, Any]) -> bool:
        """Accept a row item that is a chat message."""
        return isinstance(item.get("role"), str)
