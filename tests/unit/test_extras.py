"""A missing extra is one error line naming the `pip install` that brings it (exit 2), through the CLI's own error
path; a module set to None in sys.modules is what an environment without it looks like to an import."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from orchestrator.cli.main import main
from orchestrator.errors import EXIT_BAD_INPUT
from orchestrator.extras import EXTRAS, MissingExtra, need


def test_need_names_the_extra_and_its_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(MissingExtra) as caught:
        need("sweep", "optuna")
    assert str(caught.value) == ("sweeps need the sweep extra: pip install 'cvmjob[sweep]' (no module named "
                                 "'optuna')")
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_need_passes_when_installed_and_refuses_an_extra_pyproject_does_not_have() -> None:
    need("sweep", "optuna")  # the development environment has every extra
    with pytest.raises(ValueError, match="no extra 'sweeps'"):
        need("sweeps", "optuna")


def test_every_extra_named_here_is_one_of_pyproject() -> None:
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert all(f"\n{extra} = [" in text for extra in EXTRAS)


@pytest.mark.parametrize(("missing", "argv", "line"), [
    ("optuna", ["sweep", "ls"], "error: sweeps need the sweep extra: pip install 'cvmjob[sweep]' (no module named "
                                "'optuna')\n"),
    ("psycopg", ["--db", "postgresql://cvmjob@127.0.0.1:9/cvmjob", "ls"],
     "error: PostgreSQL stores need the postgres extra: pip install 'cvmjob[postgres]' (no module named 'psycopg')\n"),
    ("jwt", ["emulator", "serve", "--state-dir", "{tmp}/state"],
     "error: the local Tencent Cloud emulator needs the emulator extra: pip install 'cvmjob[emulator]' (no module "
     "named 'jwt')\n"),
])
def test_a_command_without_its_extra_says_one_line_and_exits_2(
    missing: str, argv: list[str], line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CVMJOB_DB", raising=False)
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(SystemExit) as exited:
        main([arg.replace("{tmp}", str(tmp_path)) for arg in argv])
    assert exited.value.code == EXIT_BAD_INPUT
    assert capsys.readouterr().err == line
    assert not (tmp_path / "state").exists()  # refused before anything was made


def test_a_report_without_its_extra_is_refused_before_it_writes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.sweep.report import write_report

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtra, match=r"pip install 'cvmjob\[report\]' \(no module named 'matplotlib'\)"):
        write_report(None, None, tmp_path / "r.html")  # type: ignore[arg-type]  # refused before it reads them
    assert list(tmp_path.iterdir()) == []
