"""``python -m ctxcli`` runs the ``ctx`` command."""

from ctxcli._entry import main

main()
