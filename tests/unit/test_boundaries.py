"""The boundaries of the house, checked on the source: the product does not know the emulator, and Tencent's
vocabulary stays in the provider (issue 9). Each check lists what breaks it, file and line."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from orchestrator.contract import Outcome, Phase
from orchestrator.providers.tencent import _sdk
from orchestrator.providers.tencent.vocabulary import ChargeType, ImageState, InstanceState, StockStatus
from orchestrator.state.machine import JobState

PACKAGE = Path(__file__).resolve().parents[2] / "orchestrator"
PROVIDER = PACKAGE / "providers" / "tencent"
EMULATOR = PACKAGE / "emulator"
HOST_MODULE = PACKAGE / "agent" / "host.py"

WIRE_WORDS = {m.value for enum in (ChargeType, InstanceState, ImageState, StockStatus) for m in enum} - {"UNKNOWN"}
# Our own states that happen to be spelt like Tencent's (PENDING, RUNNING): as values of our enums they are ours;
# compared with something, they are still flagged.
OURS = {m.value for enum in (JobState, Phase, Outcome) for m in enum}
ERROR_CODES = {code for name, table in vars(_sdk).items() if name.endswith("_PREFIXES") for code in table}


def _product_modules() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if not path.is_relative_to(PROVIDER) and not path.is_relative_to(EMULATOR):
            yield path


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _strings(tree: ast.AST) -> Iterator[ast.Constant]:
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node


def _compared(tree: ast.AST) -> Iterator[ast.Constant]:
    """String constants that are an operand of a comparison, alone or inside a tuple, list or set."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                items = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                yield from (i for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str))


def _is_error_code(text: str) -> bool:
    return any(text == code or text.startswith(code + ".") for code in ERROR_CODES)


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', '?')}"


def test_no_wire_string_outside_the_provider_and_the_emulator() -> None:
    found = []
    for path in _product_modules():
        tree = ast.parse(path.read_text(), str(path))
        for node in _strings(tree):
            distinctive = node.value in WIRE_WORDS - OURS
            if distinctive or _is_error_code(node.value):
                found.append(f"{_where(path, node)}: {node.value!r}")
        found += [f"{_where(path, n)}: compares {n.value!r}" for n in _compared(tree) if n.value in WIRE_WORDS]
    assert found == [], "Tencent's words outside providers/tencent (use the vocabulary's members):\n" + "\n".join(found)


def test_the_check_finds_a_wire_string() -> None:
    source = 'def f(i):\n    """RUNNING here is prose."""\n    return i.state == "RUNNING" or i.c == "SPOTPAID"\n'
    tree = ast.parse(source)
    assert [n.value for n in _compared(tree)] == ["RUNNING", "SPOTPAID"]
    assert [n.value for n in _strings(tree)] == ["RUNNING", "SPOTPAID"]
    assert _is_error_code("ResourceInsufficient.SpecifiedInstanceType") and not _is_error_code("Resource")


def test_only_the_agents_host_module_reads_what_the_emulator_tells_an_instance() -> None:
    # Code, not prose: `cvmjob emulator`'s help names the variable that gives the emulator its own key.
    readers = [
        _where(path, node)
        for path in _product_modules()
        if path != HOST_MODULE
        for node in _strings(ast.parse(path.read_text(), str(path)))
        if "TENCENTCLOUD_EMULATOR_" in node.value
    ]
    assert readers == []


def test_the_spec_has_no_emulator_field() -> None:
    texts = {p: p.read_text() for p in (PACKAGE / "spec").rglob("*.py")}
    assert [str(p) for p, text in texts.items() if "emulator" in text.lower()] == []


def test_only_the_provider_imports_its_sdk_module() -> None:
    importers = []
    for path in _product_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else []
            if any(name.split(".")[-1] == "_sdk" or "._sdk" in name for name in names):
                importers.append(_where(path, node))
    assert importers == []


# -- The house (issue 28): which rooms may import which ------------------------------------------------------------


def _module(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, package: Path = PACKAGE) -> Iterator[tuple[str, ast.AST]]:
    """Every module of the package that ``path`` imports, anywhere in it (inside a function or TYPE_CHECKING
    too), with ``from a import b`` counted as ``a.b``, so that a submodule imported by name is seen."""
    module = _module(path, package)
    here = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((a.name, node) for a in node.names if a.name.split(".")[0] == "orchestrator")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if source.split(".")[0] == "orchestrator":
                yield from ((f"{source}.{a.name}", node) for a in node.names)


def _room(module: str) -> str:
    """``orchestrator.state.store.Store`` -> ``state``; a top-level module is its own room (``api``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _crossings(rooms: set[str], allowed: Callable[[str], bool], package: Path = PACKAGE) -> list[str]:
    """Imports from a module of ``rooms`` of a module that ``allowed`` refuses (given its dotted name)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if _room(_module(path, package)) in rooms:
            found += [f"{path.relative_to(package.parent)}:{getattr(node, 'lineno', '?')}: {name}"
                      for name, node in _imports(path, package) if not allowed(name)]
    return found


def _under(name: str, *prefixes: str) -> bool:
    return any(name == f"orchestrator.{p}" or name.startswith(f"orchestrator.{p}.") for p in prefixes)


def test_the_top_of_the_package_holds_only_its_faces_and_leaves() -> None:
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == [
        "__init__.py", "api.py", "errors.py", "extras.py", "text.py", "trainkit.py"]


def test_the_contract_and_the_leaves_import_nothing_else_of_the_package() -> None:
    assert _crossings({"contract"}, lambda name: _under(name, "contract")) == []
    assert _crossings({"errors", "text"}, lambda name: False) == []
    assert _crossings({"extras"}, lambda name: _under(name, "errors")) == []  # the missing extra's error


def test_the_lower_rooms_import_nothing_of_the_rooms_that_drive_them() -> None:
    above = ("lifecycle", "controller", "api", "cli", "sweep", "bench")
    assert _crossings({"state", "staging", "ci", "target", "notify"}, lambda name: not _under(name, *above)) == []


def test_the_spec_knows_no_policy_and_ci_no_sweep() -> None:
    assert _crossings({"spec"}, lambda name: not _under(name, "policy")) == []
    assert _crossings({"ci"}, lambda name: not _under(name, "sweep")) == []


def test_the_agent_imports_only_what_it_ships_with() -> None:
    ships = ("agent", "contract", "providers", "spec", "plan.sizing")
    assert _crossings({"agent"}, lambda name: _under(name, *ships)) == []


def test_the_house_checks_see_a_crossing(tmp_path: Path) -> None:
    package = tmp_path / "orchestrator"
    module = package / "state" / "x.py"
    module.parent.mkdir(parents=True)
    module.write_text("def f():\n    from ..lifecycle import decide\n    from . import store\n")

    assert [name for name, _ in _imports(module, package)] == ["orchestrator.lifecycle.decide",
                                                               "orchestrator.state.store"]
    assert _crossings({"state"}, lambda name: not _under(name, "lifecycle"), package) == [
        "orchestrator/state/x.py:2: orchestrator.lifecycle.decide"]


def test_the_agents_index_lists_every_module() -> None:
    index = (PACKAGE / "agent" / "__init__.py").read_text()
    listed = set(re.findall(r"^(\w+) +|  +(\w+) {2,}", index, flags=re.MULTILINE))
    names = {a or b for a, b in listed}
    modules = {p.stem for p in (PACKAGE / "agent").glob("*.py")} - {"__init__", "__main__"}
    assert sorted(modules - names) == []
