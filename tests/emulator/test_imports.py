"""The emulator's modules import each other without a cycle, and nothing of the rest of ``orchestrator``: it is
the cloud, not a part of the client (design §6.1). Every import counts, relative ones, ``from . import x`` and
those under ``TYPE_CHECKING`` included; importing ``a.b.c`` also imports the packages ``a`` and ``a.b``."""

from __future__ import annotations

import ast
from pathlib import Path

import orchestrator.emulator as emulator_package

PACKAGE = Path(emulator_package.__file__).parent
ROOT = "orchestrator.emulator"


def module_names() -> dict[str, Path]:
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = [ROOT, *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imported(module: str, path: Path) -> set[str]:
    """Every module name ``module`` imports, absolute (a name may be a module's attribute, not a module)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            # `from pkg import name`: name may be a module of pkg.
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def with_parents(names: set[str]) -> set[str]:
    return {".".join(parts[:i]) for parts in (n.split(".") for n in names) for i in range(1, len(parts) + 1)}


def graph() -> dict[str, set[str]]:
    modules = module_names()
    return {
        name: {m for m in with_parents(imported(name, path)) if m in modules and m != name}
        for name, path in modules.items()
    }


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a path whose last module imports its first, or None (depth-first search)."""
    done: set[str] = set()
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> list[str] | None:
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges[node]):
            if nxt in on_stack:
                return stack[stack.index(nxt) :]
            if nxt not in done:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        on_stack.discard(node)
        done.add(node)
        return None

    for start in sorted(edges):
        if start not in done:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_the_finder_reports_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_relative_imports_resolve_to_modules() -> None:
    modules = module_names()
    edges = graph()
    assert f"{ROOT}.catalog" in edges[f"{ROOT}.vpc.models"]
    assert f"{ROOT}.cvm.responses.instances" in edges[f"{ROOT}.cvm.responses"]  # from . import instances
    assert f"{ROOT}.cvm" in edges[f"{ROOT}.cvm.responses.instances"]  # the packages on the way
    assert all(target in modules for targets in edges.values() for target in targets)


def test_no_import_cycle_inside_the_emulator() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join([*cycle, cycle[0]])


def test_the_emulator_imports_nothing_of_the_rest_of_orchestrator() -> None:
    outside = sorted(
        f"{module} imports {name}"
        for module, path in module_names().items()
        for name in imported(module, path)
        if name.split(".")[0] == "orchestrator" and name != ROOT and not name.startswith(ROOT + ".")
    )
    assert not outside, "\n".join(outside)
