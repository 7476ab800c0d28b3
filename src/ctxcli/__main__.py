"""``python -m ctxcli`` runs the ``ctx`` command."""

from ._entry import main

main()
