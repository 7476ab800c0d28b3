"""``python -m ctxcli`` runs the ``ctx`` command."""

from .cli import main

main()
