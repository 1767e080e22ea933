"""``--set key.path=value``: changes to the spec's YAML mapping before it is validated.

A path is dotted keys into mappings and indexes into lists (``data.0.target``). Missing mappings on the way
are created; a list index may be one past the end to append. The value is read as a YAML scalar (``2`` is a
number, ``true`` a boolean, an empty value null); a value starting with ``[`` or ``{`` is read as a YAML flow
list or mapping. Anything else stays text, so ``--set train.command=python a.py --lr: 3`` is one string.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from orchestrator.spec.errors import Problem, SpecError


class _BadPath(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def apply_overrides(document: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A copy of ``document`` with each ``key.path=value`` applied in order; SpecError lists the bad ones."""
    result = copy.deepcopy(document)
    problems = []
    for override in overrides:
        source = f"--set {override}"
        parts = override_path(override)
        if parts is None:
            problems.append(Problem(source, "", "expected key.path=value, e.g. --set train.nnodes=2"))
            continue
        try:
            _assign(result, list(parts), parse_value(override.partition("=")[2]))
        except _BadPath as exc:
            problems.append(Problem(source, exc.path, exc.message))
    if problems:
        raise SpecError(problems)
    return result


def override_path(override: str) -> tuple[str, ...] | None:
    """The keys of ``key.path=value`` (None: not of that form)."""
    key, separator, _ = override.partition("=")
    parts = tuple(key.strip().split("."))
    return parts if separator and all(parts) else None


def set_values(document: dict[str, Any], values: Mapping[str, Any], source: str = "set") -> dict[str, Any]:
    """A copy of ``document`` with each dotted path set to its value as it is (typed: no text to read back, so
    a string stays a string and a float keeps its precision); SpecError lists the bad paths."""
    result = copy.deepcopy(document)
    problems = []
    for key, value in values.items():
        parts = key.strip().split(".")
        if not all(parts):
            problems.append(Problem(f"{source}.{key}", "", "expected a dotted path, e.g. train.env.LR"))
            continue
        try:
            _assign(result, parts, copy.deepcopy(value))
        except _BadPath as exc:
            problems.append(Problem(f"{source}.{key}", exc.path, exc.message))
    if problems:
        raise SpecError(problems)
    return result


def parse_value(raw: str) -> Any:
    """``raw`` as YAML reads a scalar, or a flow list/mapping when it starts with ``[`` or ``{``."""
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw
    if isinstance(value, dict | list) and not raw.lstrip().startswith(("[", "{")):
        return raw
    return value


def _assign(node: Any, parts: list[str], value: Any) -> None:
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        key: Any = part
        if isinstance(node, list):
            if not part.isdigit() or int(part) > len(node):
                raise _BadPath(".".join(parts[: depth + 1]),
                               f"not an index of this list. use 0..{len(node)} ({len(node)} appends)")
            key = int(part)
            if key == len(node):
                node.append(None)
        elif not isinstance(node, dict):
            parent = ".".join(parts[:depth])
            raise _BadPath(parent, f"is {node!r}, not a mapping or list, so it has no {part!r}")
        if last:
            node[key] = value
            return
        if (node[key] if isinstance(node, list) else node.get(key)) is None:
            # An absent or null step (e.g. `image:` left empty) becomes what the rest of the path needs.
            node[key] = [] if parts[depth + 1].isdigit() else {}
        node = node[key]
