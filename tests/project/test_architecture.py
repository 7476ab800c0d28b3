"""docs/ARCHITECTURE.md keeps up with the tree, as datasette's tests/test_docs.py does.

Every package of ``src/ctxcli`` has its paragraph (``**store** — ...``) and every module
is named in its package's paragraph (``naming.py``, or `` `claude_code` `` in a list; a
subpackage as ``tokens/``); the
top-level modules are named somewhere in the map. The tests mirror the packages.
"""

from __future__ import annotations

import re
from pathlib import Path

from support.paths import REPO, TESTS

PACKAGE = REPO / "src" / "ctxcli"
MAP = REPO / "docs" / "ARCHITECTURE.md"
# Test folders that are not a package's: the repository's own checks, the facade's
# (ctxcli.testing), the real clients, the example plugins, and what the tests share.
NOT_PACKAGES = {"project", "facade", "e2e", "plugin_example", "plugin_format_example"}


def _packages() -> list[str]:
    return sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def _sections(text: str) -> dict[str, str]:
    """The text after each ``**name**`` marker up to the next one, by name."""
    marks = list(re.finditer(r"\*\*([a-z_]+)\*\*", text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return {m.group(1): text[m.end() : end] for m, end in zip(marks, ends, strict=True)}


def _named(section: str, names: list[str]) -> bool:
    """The module's own name is there (as ``x.py`` or `x`), and so is each folder above it."""
    own, *rest = names
    if own.endswith("/"):
        return own in section
    stem, folders = names[1], names[2:]
    return (own in section or stem in section) and all(f in section for f in folders)


def test_every_package_and_module_is_on_the_map() -> None:
    text = MAP.read_text(encoding="utf-8")
    sections = _sections(text)
    missing = [f"**{name}**" for name in _packages() if name not in sections]
    for name in _packages():
        section = sections.get(name, "")
        for path in sorted((PACKAGE / name).rglob("*.py")):
            rel = path.relative_to(PACKAGE / name)
            if rel == Path("__init__.py"):
                continue
            if path.name == "__init__.py":
                names = [f"{rel.parent.name}/"]
            else:  # ``naming.py``, or the module as `naming` in a list of them
                names = [path.name, f"`{path.stem}`", *(f"{p}/" for p in rel.parent.parts)]
            if not _named(section, names):
                missing.append(f"{name}/{rel}")
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name not in text:
            missing.append(path.name)
    assert missing == [], f"not named in {MAP.name} (in their package's paragraph)"


def test_the_tests_mirror_the_packages() -> None:
    flat = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert flat == [], "a test file lives in the folder of the package it tests"
    folders = {p.parent.name for p in TESTS.glob("*/test_*.py")}
    strays = sorted(folders - set(_packages()) - NOT_PACKAGES)
    assert strays == [], "a test folder is named after the package it tests"
