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


REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(src: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=config.parent,
        env=env,
        check=False,
    )


def test_layer_contracts_hold() -> None:
    """The import-linter contracts in pyproject.toml (cli > ... > core) are kept."""
    result = _lint_imports(REPO / "src", REPO / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_layer_contracts_catch_an_upward_import(tmp_path: Path) -> None:
    """The contracts are not vacuous: a core module importing the pipeline breaks them."""
    import shutil

    shutil.copytree(REPO / "src" / "ctxcli", tmp_path / "src" / "ctxcli")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    model = tmp_path / "src" / "ctxcli" / "core" / "hints.py"
    model.write_text(model.read_text() + "\nfrom ctxcli.pipeline import reducer  # noqa\n")
    result = _lint_imports(tmp_path / "src", tmp_path / "pyproject.toml")
    assert result.returncode != 0
    assert "ctxcli.core.hints -> ctxcli.pipeline.reducer" in result.stdout
