"""Stand-ins for modules and names (orchestrator/cli/lazy.py): nothing is imported until used, and once used they act as
what they stand for (calls, attributes, isinstance), so a command's body cannot tell them from the real import."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.cli.lazy import lazy_module, lazy_name, loaded

SOURCE = '''
LOADS = []
LOADS.append(1)


class Thing:
    def __init__(self, value):
        self.value = value


class Other:
    pass


def double(x):
    return 2 * x
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "lazy_probe.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "lazy_probe"
    sys.modules.pop("lazy_probe", None)


def test_nothing_is_imported_until_first_use(module: str) -> None:
    whole, double = lazy_module(module), lazy_name(module, "double")
    assert not loaded(module) and module not in sys.modules
    assert double(21) == 42
    assert loaded(module)
    assert whole.LOADS == [1]  # the same module, run once


def test_a_class_stand_in_builds_instances_and_answers_isinstance(module: str) -> None:
    thing, other = lazy_name(module, "Thing"), lazy_name(module, "Other")
    made = thing(3)
    assert made.value == 3
    assert isinstance(made, thing) and not isinstance(made, other)
    assert issubclass(type(made), thing)
    assert thing.__name__ == "Thing"


def test_setting_an_attribute_sets_it_on_the_module(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = lazy_module(module)
    monkeypatch.setattr(whole, "double", lambda x: -x)  # as a test patches `api.plan` through cli.main's stand-in
    assert sys.modules[module].double(3) == -3 and lazy_name(module, "double")(3) == -3
    monkeypatch.undo()
    assert whole.double(3) == 6


def test_a_name_the_module_lacks_fails_at_use_as_an_import_would(module: str) -> None:
    missing = lazy_name(module, "absent")
    with pytest.raises(AttributeError):
        missing()


def test_cvmjob_help_imports_no_command_s_modules() -> None:
    """What makes `cvmjob --help` fast (benchmarks/cli_startup.py times it): none of the heavy modules load."""
    probe = (
        "import sys\n"
        "from orchestrator.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('orchestrator.api', 'orchestrator.state.store', 'orchestrator.spec', 'orchestrator.contract', "
        "'orchestrator.cli.render', 'pydantic', 'sqlalchemy', 'rich', 'optuna', 'aiohttp', 'qcloud_cos', "
        "'tencentcloud', 'importlib.metadata')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stderr == "[]\n"
    assert "Usage: cvmjob" in done.stdout


def names_only_type_checking_binds(path: Path) -> list[str]:
    """The names a module's code uses at run time (function bodies, defaults, decorators; not annotations) that only
    an ``if TYPE_CHECKING:`` import binds, with no stand-in at run time: each would be a NameError in its command."""
    tree = ast.parse(path.read_text())
    checking: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    checking |= {(a.asname or a.name).split(".")[0] for a in inner.names}
    bound_at_run_time: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for inner in ast.walk(ast.Module(body=node.orelse, type_ignores=[])):
                if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                    bound_at_run_time.add(inner.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):  # locals and imports inside functions
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    bound_at_run_time |= {(a.asname or a.name).split(".")[0] for a in inner.names}
                elif isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                    bound_at_run_time.add(inner.id)
                elif isinstance(inner, ast.arg):
                    bound_at_run_time.add(inner.arg)
    used: set[str] = set()

    class Uses(ast.NodeVisitor):
        def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            for part in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults, *node.body]:
                if part is not None:
                    self.visit(part)

        visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

        def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
            if node.value is not None:
                self.visit(node.value)

        def visit_Name(self, node: ast.Name) -> None:
            if isinstance(node.ctx, ast.Load):
                used.add(node.id)

    Uses().visit(tree)
    return sorted(used & checking - bound_at_run_time)


CLI = sorted((Path(__file__).resolve().parents[3] / "orchestrator" / "cli").glob("*.py"))


@pytest.mark.parametrize("path", CLI, ids=lambda p: p.name)
def test_every_name_a_command_uses_is_bound_at_run_time(path: Path) -> None:
    assert names_only_type_checking_binds(path) == []


def test_the_check_finds_a_name_only_type_checking_binds(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from a import Used, Annotated, Lazy\n"
                      "else:\n    Lazy = object()\n\ndef f(x: Annotated) -> Used:\n    return Used(x), Lazy\n")
    assert names_only_type_checking_binds(module) == ["Used"]
