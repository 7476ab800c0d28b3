"""The library's shape (issue 33): one module per concept name, short functions, few parameters.

Counted over ``src/ctxcli`` with the AST: a function's length runs from its ``def`` line
to its last line; its parameters are all it declares but ``self``/``cls``.
"""

from __future__ import annotations

import ast
import importlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from support.paths import REPO

PACKAGE = REPO / "src" / "ctxcli"
MAX_LINES = 60
MAX_LONG_FUNCTIONS = 12
MAX_PARAMETERS = 8

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _functions(tree: ast.AST, public: bool = True) -> Iterator[tuple[str, Function, bool]]:
    """Every function and method with its dotted name, and whether callers outside see it."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            shown = public and (not node.name.startswith("_") or node.name == "__init__")
            yield node.name, node, shown
            for name, inner, _ in _functions(node, public=False):
                yield f"{node.name}.{name}", inner, False
        elif isinstance(node, ast.ClassDef):
            shown = public and not node.name.startswith("_")
            for name, inner, inner_shown in _functions(node, shown):
                yield f"{node.name}.{name}", inner, inner_shown


def _where(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def _private(path: Path) -> bool:
    """A module only its package uses (``_entry.py``, ``stages/_validity.py``)."""
    return path.name.startswith("_") and not path.name.startswith("__")


def _parameters(fn: Function) -> int:
    args = fn.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names = [n for n in names if n not in ("self", "cls")]
    return len(names) + (args.vararg is not None) + (args.kwarg is not None)


def test_no_two_library_modules_share_a_name() -> None:
    # Two `reducer`s, two `base`s: a reader cannot tell them apart in a traceback or a
    # search. The CLI's modules are named after its commands and may echo a package.
    names = Counter(
        p.name
        for p in _modules()
        if p.parent.name != "cli" and p.name not in ("__init__.py", "__main__.py")
    )
    assert [n for n, count in names.items() if count > 1] == []


def test_at_most_twelve_functions_are_longer_than_sixty_lines() -> None:
    long = sorted(
        f"{_where(path)}:{name} {fn.end_lineno - fn.lineno + 1}"  # type: ignore[operator]
        for path in _modules()
        for name, fn, _ in _functions(ast.parse(path.read_text(encoding="utf-8")))
        if fn.end_lineno - fn.lineno + 1 > MAX_LINES  # type: ignore[operator]
    )
    assert len(long) <= MAX_LONG_FUNCTIONS, "\n".join(long)


def test_no_public_library_function_takes_more_than_eight_parameters() -> None:
    many = sorted(
        f"{_where(path)}:{name} {_parameters(fn)}"
        for path in _modules()
        if path.parent.name != "cli" and not _private(path)
        for name, fn, public in _functions(ast.parse(path.read_text(encoding="utf-8")))
        if public and _parameters(fn) > MAX_PARAMETERS
    )
    assert many == []


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_public_module_declares_all_and_every_name_in_it_exists() -> None:
    """A reader sees what a module offers in its ``__all__`` (STYLE §1); private ones are ``_``."""
    missing, absent = [], []
    for path in _modules():
        rel = path.relative_to(PACKAGE)
        if path.name == "__main__.py" or any(_private(Path(p)) for p in rel.parts):
            continue
        module = importlib.import_module(_module_name(path))
        names = vars(module).get("__all__")
        if names is None:
            missing.append(_where(path))
            continue
        absent += [f"{_where(path)}: {n}" for n in names if not hasattr(module, n)]
    assert missing == [], "public modules without __all__ (name the private ones _x.py)"
    assert absent == [], "names in __all__ the module does not have"
