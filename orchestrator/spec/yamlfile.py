"""Reading a spec or policy file: a YAML mapping, or a SpecError that says where the file went wrong."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from orchestrator.spec.errors import SpecError

_MERGE_TAG = "tag:yaml.org,2002:merge"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_STR_TAG = "tag:yaml.org,2002:str"


class _NoDuplicatesLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key written twice in one mapping (plain PyYAML keeps the last silently), and reads
    the keys ``on``, ``off``, ``yes``, ``no`` as the words they are: YAML 1.1 makes them booleans, so ``notify``'s
    ``on:`` arrived as the key True."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            if (isinstance(key_node, ScalarNode) and key_node.tag == _BOOL_TAG and not key_node.style
                    and key_node.value.lower() not in ("true", "false")):
                key_node.tag = _STR_TAG
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # SafeConstructor reports it ("found unhashable key")
            if key in seen:
                raise ConstructorError(None, None, f"duplicate key {key!r}. keep one of them", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


Position = tuple[int, int]  # line and column, from 1


@dataclass(frozen=True)
class YamlDocument:
    """A spec file's mapping and where each field is written in it: a mapping's entry at its key, a list's item at
    the item (paths of keys and list indexes, as text)."""

    data: dict[str, Any]
    positions: dict[tuple[str, ...], Position] = field(default_factory=dict)


def read_mapping(path: Path, what: str, required: list[str]) -> dict[str, Any]:
    """The top-level mapping of the YAML file at ``path``: a ``what`` (e.g. "job spec") with ``required`` fields."""
    return read_document(path, what, required).data


def read_document(path: Path, what: str, required: list[str]) -> YamlDocument:
    """``read_mapping``, with the positions of the fields (for errors that say ``file:line:col``)."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError.single(source, f"no such file. check the path of the {what}") from None
    except IsADirectoryError:
        raise SpecError.single(source, f"is a folder, not a {what} file") from None
    except UnicodeDecodeError as exc:
        raise SpecError.single(source, f"is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise SpecError.single(source, f"cannot be read: {exc.strerror}") from None
    try:
        data, root = _load(text)
    except yaml.MarkedYAMLError as exc:
        raise SpecError.single(_at(source, exc), _yaml_problem(exc)) from None
    except yaml.YAMLError as exc:
        raise SpecError.single(source, "is not valid YAML: " + " ".join(str(exc).split())) from None
    except RecursionError:  # PyYAML composes nodes recursively
        raise SpecError.single(source, "is nested too deeply to be a spec") from None
    needs = f"a {what} needs at least: {', '.join(required)}"
    if data is None:
        raise SpecError.single(source, f"the file is empty. {needs}")
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else repr(data)[:60]
        raise SpecError.single(source, f"the top level must be a mapping of fields (name: value), got {kind}. {needs}")
    return YamlDocument(data, _positions(root))


def _at(source: str, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    return f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source


def _yaml_problem(exc: yaml.MarkedYAMLError) -> str:
    problem = exc.problem or "invalid YAML"
    return f"{problem} ({exc.context})" if exc.context else problem


def _load(text: str) -> tuple[Any, Node | None]:
    """What ``yaml.load`` returns, and the node tree it was built from (which has the positions)."""
    loader = _NoDuplicatesLoader(text)  # a SafeLoader: no arbitrary objects
    try:
        root = loader.get_single_node()
        return (None if root is None else loader.construct_document(root)), root
    finally:
        loader.dispose()


def _positions(root: Node | None) -> dict[tuple[str, ...], Position]:
    """Each field's path to where it is written. Iterative, and each node is entered once: an alias (``*x``) is
    placed where it is written, not followed (an anchor may hold itself, or be repeated a billion times)."""
    found: dict[tuple[str, ...], Position] = {}
    entered: set[int] = set()
    stack: list[tuple[tuple[str, ...], Node | None]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if node is None or id(node) in entered:
            continue
        entered.add(id(node))
        children: list[tuple[str, Node, Node]] = []  # (key, where it is written, its value)
        if isinstance(node, MappingNode):
            children = [(key.value, key, value) for key, value in node.value
                        if isinstance(key, ScalarNode) and key.tag != _MERGE_TAG]
        elif isinstance(node, SequenceNode):
            children = [(str(index), item, item) for index, item in enumerate(node.value)]
        for key, written, value in reversed(children):  # taken in the file's order: an anchor before its aliases
            child = (*path, key)
            found.setdefault(child, (written.start_mark.line + 1, written.start_mark.column + 1))
            stack.append((child, value))
    return found
