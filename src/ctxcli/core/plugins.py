"""One registry design for what packages add to ctx: stages and formats.

Built-ins register through the very path plugins use (as simonw/llm registers its
default plugins with the same plugin manager as third-party ones): a module is
imported, the ``register`` calls it makes while importing are collected, and each
item joins the registry under the package that defined it. The built-in modules are
listed by ctx in order; third-party modules come from a versioned entry-point group
(``ctxcli.stages.v1``, ``ctxcli.formats.v1``), sorted by distribution and name, and
always after the built-ins: installing a plugin never changes how a transcript that
loads today is read. ``CTX_NO_PLUGINS=1`` leaves the entry points alone.

An item is credited to the module that defined it, not to whichever import happened
to run its ``register`` call first, so the order of the built-ins is the order of
their list even when one built-in module imports another.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from ctxcli.core.errors import ConfigError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "BUILTIN",
    "Registry",
    "package_of_module",
    "plugins_enabled",
]

T = TypeVar("T")

BUILTIN = "ctxcli"
"""The package credited with the built-ins."""


def plugins_enabled() -> bool:
    """False when ``CTX_NO_PLUGINS`` is set (to anything but ``0``): built-ins only."""
    return os.environ.get("CTX_NO_PLUGINS", "") in ("", "0")


def package_of_module(module: str) -> str:
    """The package a module belongs to (``ctxcli`` for ctx's own)."""
    return (
        BUILTIN if module == BUILTIN or module.startswith(BUILTIN + ".") else module.split(".")[0]
    )


@dataclass(eq=False)
class Registry(Generic[T]):
    """Named items of one kind, from ctx's own modules and from an entry-point group.

    ``admit`` checks an item as it joins (raising :class:`ConfigError` in words a
    plugin author can act on) and may return it stamped with its package; ``same``
    tells a module that registered twice (a reload) from two packages that chose one
    name; ``how`` says how a module registers (``{module}`` is filled in), for an
    entry point that registers nothing.
    """

    kind: str
    group: str
    builtins: Callable[[], Iterable[str]]
    name_of: Callable[[T], str]
    module_of: Callable[[T], str]
    how: str
    admit: Callable[[T, str], T] = lambda item, _package: item
    same: Callable[[T, T], bool] = lambda a, b: a is b
    _items: dict[str, T] = field(default_factory=dict)
    _packages: dict[str, str] = field(default_factory=dict)
    _pending: list[T] = field(default_factory=list)
    _builtins_loaded: bool = False
    _plugins_loaded: bool = False

    def register(self, item: T) -> T:
        """Declare an item; it joins when the registry loads the module that defined it."""
        self._pending.append(item)
        return item

    def items(self) -> dict[str, T]:
        """Every item by name: the built-ins in their order, then the entry-point plugins.

        Items registered later by a script (not through a module the registry loads)
        are picked up on the next call.
        """
        self.load_builtins()
        if not self._plugins_loaded and plugins_enabled():
            self._load_plugins()
            # Only after every plugin loaded: a broken one fails every call, not just the first.
            self._plugins_loaded = True
        # The rest came from modules imported some other way (a script's own stage, a
        # plugin module imported before the registry loaded its entry point).
        for item in self._take(None):
            self._add(item, package_of_module(self.module_of(item)))
        return self._items

    @property
    def loaded(self) -> dict[str, T]:
        """The items registered so far, loading nothing (the same dict :meth:`items` fills)."""
        return self._items

    def package(self, name: str) -> str:
        """The package that registered ``name``."""
        return self._packages.get(name, BUILTIN)

    def reset(self) -> None:
        """Forget every plugin and script registration: the built-ins alone again.

        Back to the built-ins alone: what plugins and scripts registered is forgotten,
        and the entry points load again on the next :meth:`items` call.

        For tests (a test that registers a stage of its own resets before and after it)
        and for a program that changes ``CTX_NO_PLUGINS`` while it runs. The dict
        :attr:`loaded` returns is emptied in place, so whoever holds it sees the reset.
        A plugin module stays imported, and importing it again registers nothing: take
        it out of ``sys.modules`` for its entry point to load it afresh.
        """
        self.load_builtins()
        for name in [n for n in self._items if self.package(n) != BUILTIN]:
            del self._items[name]
            del self._packages[name]
        self._pending.clear()
        self._plugins_loaded = False

    def load_builtins(self) -> None:
        """Import ctx's own modules of this kind (once); each registers its items."""
        if self._builtins_loaded:
            return
        self._builtins_loaded = True
        for module in self.builtins():
            importlib.import_module(module)
            self._join(module, BUILTIN, f"built-in module {module}")

    def _load_plugins(self) -> None:
        from importlib.metadata import entry_points

        def order(ep: EntryPoint) -> tuple[str, str]:
            return (ep.dist.name if ep.dist else "", ep.name)

        for ep in sorted(entry_points(group=self.group), key=order):
            package = ep.dist.name if ep.dist else ep.module.split(".")[0]
            where = f"entry point {ep.name} = {ep.value!r} of package {package}"
            try:
                ep.load()
            except Exception as exc:
                raise ConfigError(
                    f"{where} failed to load ({type(exc).__name__}: {exc}); fix or uninstall "
                    "the plugin, or set CTX_NO_PLUGINS=1 to run without plugins."
                ) from exc
            self._join(ep.module, package, where)

    def _join(self, module: str, package: str, where: str) -> None:
        """Add the items ``module`` defined; it must define one (or have done so before)."""
        taken = self._take(module)
        for item in taken:
            self._add(item, package)
        if not taken and not any(_within(self.module_of(i), module) for i in self._items.values()):
            raise ConfigError(
                f"{where} registers no {self.kind}; {self.how.format(module=module)}."
            )

    def _take(self, module: str | None) -> list[T]:
        """The pending items defined in ``module`` (all of them for None), in order."""
        mine = [i for i in self._pending if module is None or _within(self.module_of(i), module)]
        self._pending = [i for i in self._pending if not any(i is m for m in mine)]
        return mine

    def _add(self, item: T, package: str) -> None:
        item = self.admit(item, package)
        name = self.name_of(item)
        other = self._items.get(name)
        if other is not None and not self.same(other, item):
            raise ConfigError(
                f"{self.kind} {name!r} is defined twice: by {self.package(name)} and by "
                f"{package}; uninstall one of them or set CTX_NO_PLUGINS=1."
            )
        self._items[name] = item
        self._packages[name] = package


def _within(module: str, parent: str) -> bool:
    return module == parent or module.startswith(parent + ".")
