"""Imports deferred to first use, so that ``cvmjob --help`` does not pay for every command's modules (the CLI's
start-up cost: benchmarks/cli_startup.py).

``lazy_module("orchestrator.api")`` stands for a module, ``lazy_name("orchestrator.controller.drive", "drive")`` for
one function or class of a module: each imports it at its first attribute access, call or ``isinstance``. They are
bound in the ``else:`` of an ``if TYPE_CHECKING:`` that imports the real names, so mypy checks every use as usual.

Stand-ins, not importlib's LazyLoader: a LazyLoader module sits in sys.modules, and whatever walks sys.modules loads
it there and then (pydantic's ``inspect.getmodule`` does, while a model class is being built), in the middle of
another import, which then fails as a circular one. A stand-in cannot be named in an ``except`` clause (Python
requires a class there): import such a class from a light module, or catch ``module.Error`` of a ``lazy_module``.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any


class _Lazy:
    """A module, or one name of it, imported when first used."""

    __slots__ = ("_module", "_name", "_target")

    def __init__(self, module: str, name: str | None) -> None:
        self._module = module
        self._name = name
        self._target: Any = None

    def _load(self) -> Any:
        if self._target is None:
            module = importlib.import_module(self._module)
            self._target = module if self._name is None else getattr(module, self._name)
        return self._target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._load()(*args, **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._load(), attribute)

    def __setattr__(self, attribute: str, value: Any) -> None:  # a test's monkeypatch reaches the real module
        if attribute in _Lazy.__slots__:
            object.__setattr__(self, attribute, value)
        else:
            setattr(self._load(), attribute, value)

    def __delattr__(self, attribute: str) -> None:
        delattr(self._load(), attribute)

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, self._load())

    def __subclasscheck__(self, subclass: type) -> bool:
        return issubclass(subclass, self._load())

    def __repr__(self) -> str:
        return f"<lazy {self._module}{'' if self._name is None else '.' + self._name}>"


def lazy_module(name: str) -> Any:
    """A stand-in for ``import name`` that imports it at its first attribute access."""
    return _Lazy(name, None)


def lazy_name(module: str, name: str) -> Any:
    """A stand-in for ``from module import name`` (a function or a class) that imports ``module`` at first use."""
    return _Lazy(module, name)


def loaded(module: str) -> bool:
    """Whether ``module`` was imported in this process (by its stand-in or otherwise)."""
    return module in sys.modules
