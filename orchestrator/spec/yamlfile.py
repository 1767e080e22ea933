"""Reading a spec or policy file: a YAML mapping, or a SpecError that says where the file went wrong."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

from orchestrator.spec.errors import SpecError

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _NoDuplicatesLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key written twice in one mapping (plain PyYAML keeps the last silently)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # SafeConstructor reports it ("found unhashable key")
            if key in seen:
                raise ConstructorError(None, None, f"duplicate key {key!r}. keep one of them", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_mapping(path: Path, what: str, required: list[str]) -> dict[str, Any]:
    """The top-level mapping of the YAML file at ``path``: a ``what`` (e.g. "job spec") with ``required`` fields."""
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
        data = yaml.load(text, Loader=_NoDuplicatesLoader)  # a SafeLoader: no arbitrary objects
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
    return data


def _at(source: str, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    return f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source


def _yaml_problem(exc: yaml.MarkedYAMLError) -> str:
    problem = exc.problem or "invalid YAML"
    return f"{problem} ({exc.context})" if exc.context else problem
