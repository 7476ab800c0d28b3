"""The bench modules as a package: ``from support.bench.gen_transcript import generate``.

``benchmarks/`` is a folder of scripts, not a package: each runs as
``python benchmarks/NAME.py`` and imports its neighbours by their bare names
(``from peers import ...``), its own folder being ``sys.path[0]``. The tests use four of
them (the synthetic transcript generator, recall, the peers, eval); this package's path
is that folder, so a test imports them by a qualified name with no ``sys.path`` edit of
its own, and the folder is appended to ``sys.path`` here, once, for the neighbours' bare
imports (appended, so it shadows nothing).
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"

__path__ = [str(BENCHMARKS)]
if str(BENCHMARKS) not in sys.path:
    sys.path.append(str(BENCHMARKS))
