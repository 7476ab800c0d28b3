"""A facade's names, imported on first use (PEP 562): one loader for every facade."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(
    package: str,
    names: Mapping[str, str],
    deprecated: Mapping[str, tuple[str, str]] | None = None,
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports each of ``names`` on first use.

    ``names`` maps a name to the submodule that defines it, relative to ``package``
    (``"prices"`` for ``package.prices``). The value is kept in the package's namespace, so
    the loader runs once per name. Keeps ``import package`` cheap: ``ctx --version``
    starts fast, and the price table loads without the token counters. ``deprecated``
    maps an old name to ``(submodule, new name)``: it warns and gives the new one.

    Example:
        >>> __getattr__ = lazy_getattr(__name__, {"load_price_table": "prices"})  # doctest: +SKIP
    """
    old_names = dict(deprecated or {})

    def __getattr__(name: str) -> Any:
        if name in old_names:
            home, new = old_names[name]
            warnings.warn(
                f"{package}.{name} is deprecated and will be removed; use {package}.{new}",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(f".{home}", package), new)
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
