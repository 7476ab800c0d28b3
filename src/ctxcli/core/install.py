"""How to add an extra to this installation of ctx: the ``pip install`` a hint names.

The distribution is not published yet, so ``pip install 'ctx-lossless[report]'`` finds
nothing for most users; ctx installed from a checkout (``pip install -e .``) records
where it came from (PEP 610's ``direct_url.json``), and the hint names that checkout.
"""

from __future__ import annotations

import json
from importlib import metadata
from urllib.parse import unquote, urlparse

__all__ = ["DISTRIBUTION", "install_command"]

DISTRIBUTION = "ctx-lossless"


def install_command(extra: str) -> str:
    """The command that installs ``extra`` for the ctx that runs.

    ``pip install -e '/path/to/checkout[extra]'`` for an editable install from a
    checkout, ``pip install '/path[extra]'`` for one from a local directory, else the
    distribution's name.
    """
    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        origin = json.loads(text) if text else {}
    except (metadata.PackageNotFoundError, ValueError):
        origin = {}
    url = urlparse(str(origin.get("url", "")))
    if url.scheme == "file" and isinstance(origin.get("dir_info"), dict):
        editable = "-e " if origin["dir_info"].get("editable") else ""
        return "pip install " + editable + f"'{unquote(url.path)}[{extra}]'"
    return "pip install " + f"'{DISTRIBUTION}[{extra}]'"
