"""The README's agent-loop section: its Reducer example runs as written, the others compile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.paths import REPO

README = REPO / "docs" / "python.md"
TITLE = "In the agent loop: `Reducer`, LangChain, OpenAI Agents SDK"


def blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(TITLE)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"README.md has no '## {TITLE}' section"
    return re.findall(r"```python\n(.*?)```", match.group(1), re.S)


def test_reducer_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(blocks()[0], "README.md", "exec"), {"__name__": "__readme__"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("0 ") and "reused 0" in lines[0]
    assert "reused 3" in lines[1] and "reused 5" in lines[2]
    assert all(int(x.split(" -> ")[1].split()[0]) < int(x.split()[1]) for x in lines[:3])
    path = Path(lines[3])
    assert path.is_absolute() and path.read_text().startswith("cc -O2 -c part2.c\n")


def test_integration_examples_import_what_they_name() -> None:
    pytest.importorskip("langchain", reason="langchain cannot be installed here")
    pytest.importorskip("agents", reason="openai-agents cannot be installed here")
    for block in blocks()[1:]:
        code = compile(block, "README.md", "exec")
        imports = "\n".join(line for line in block.splitlines() if line.startswith("from "))
        exec(compile(imports, "README.md", "exec"), {})
        assert code.co_names
