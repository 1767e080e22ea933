"""`cvmjob sweep run --set key.path=value` overrides the sweep spec as `run --set` does a job spec: its problems name
the --set, and a detached sweep runs with the same overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator import api
from orchestrator.cli.main import app
from orchestrator.spec.errors import SpecError
from tests.unit.sweep.test_spec import GOOD


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CVMJOB_DB", str(tmp_path / "state.db"))
    monkeypatch.delenv("CI", raising=False)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    return path


def test_a_bad_override_is_named_and_nothing_runs(sweep: Path) -> None:
    result = CliRunner().invoke(app, ["sweep", "run", str(sweep), "--set", "trials=0", "--detach"])
    assert isinstance(result.exception, SpecError)
    assert str(result.exception) == "--set trials=0: trials: 0 is out of range. allowed: 1..10000"
    assert not (sweep.parent / "state.db").exists()


def test_a_detached_sweep_runs_with_the_overrides(sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []
    monkeypatch.setattr(api, "in_background", lambda command, name: started.append(command) or Path("sweep.log"))
    result = CliRunner().invoke(app, ["sweep", "run", str(sweep), "--set", "study=night-2", "--set", "trials=9",
                                      "--detach", "--output", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"study": "night-2", "detached": True, "log": "sweep.log"}
    assert started == [["sweep", "run", str(sweep.resolve()), "--set", "study=night-2", "--set", "trials=9"]]
