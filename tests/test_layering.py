"""The library never pulls in the CLI: typer and rich stay out of a library-only run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "sample_transcripts" / "openai_chat_support.jsonl"

CODE = f"""
import sys
from ctxcli import reduce_bytes, load_config
from ctxcli.formats.validate import validate_bytes
data = open({str(SAMPLE)!r}, "rb").read()
out = reduce_bytes(data).output
assert validate_bytes(out) == []
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("typer", "rich", "click")
                or m == "ctxcli.cli")
print(",".join(leaked))
"""


def test_library_does_not_import_the_cli(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
