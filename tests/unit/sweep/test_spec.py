"""The sweep spec: what it accepts, and one clear line for each thing wrong (nothing is created for a bad one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.spec.errors import SpecError
from orchestrator.sweep.run import JobTemplate, trial_job_name
from orchestrator.sweep.spec import Param, SweepSpec, load_sweep, placeholders, render

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "jobs" / "quickstart" / "job.yaml"
GOOD: dict[str, Any] = {
    "study": "s",
    "job": str(QUICKSTART),
    "space": {"lr": {"low": 0.001, "high": 0.1, "log": True}, "hidden": {"low": 64, "high": 256, "step": 64}},
    "set": {"train.command": "python train.py --lr {lr} --hidden {hidden}"},
    "objective": {"metric": "val_loss"},
    "trials": 4,
}


def write(tmp_path: Path, **changes: Any) -> Path:
    doc = {**GOOD, **changes}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in doc.items() if v is not None}))
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        spec = load_sweep(path)
        JobTemplate.of(spec, path).check(spec)
    return str(caught.value).splitlines()


def test_the_example_sweep_loads_and_its_trials_render_into_valid_jobs() -> None:
    path = REPO / "sweeps" / "quickstart" / "sweep.yaml"
    spec = load_sweep(path)
    template = JobTemplate.of(spec, path)
    template.check(spec)
    document = template.trial_document(spec, {"lr": 0.0123456789, "hidden": 128}, 7)
    assert document["train"]["command"] == "python train.py --steps 40 --eval-every 10 --lr 0.0123456789 --hidden 128"
    assert document["name"] == "quickstart-lr-t7" and document["billing"]["mode"] == "spot"


@pytest.mark.parametrize(("changes", "expected"), [
    ({"sampler": {"type": "bayes"}}, "sampler.type: 'bayes' is not one of 'tpe', 'random', 'grid'"),
    ({"space": {}}, "space:"),
    ({"space": {"lr": {"low": 0.1, "high": 0.01}}}, "space.lr.low: low (0.1) is above high (0.01). swap them"),
    ({"set": {"train.command": "python train.py --lr {lr} --momentum {momentum}"}},
     "set.train.command: the placeholder {momentum} names no parameter of the space (hidden, lr)"),
    ({"pruner": {"type": "asha", "reduction_factr": 3}}, "pruner.reduction_factr: unknown field. did you mean"),
    ({"space": {"opt": {"choices": []}}}, "space.opt.choices: a categorical parameter needs at least one choice"),
    ({"space": {"lr": {"low": 0, "high": 1, "log": True}}}, "space.lr.low: a log-scale parameter needs low > 0"),
    ({"sampler": {"type": "grid"}}, "space.lr: the grid sampler needs a step (or choices) for a float"),
])
def test_a_bad_sweep_gets_one_line_naming_its_field(tmp_path: Path, changes: dict[str, Any], expected: str) -> None:
    lines = problems(write(tmp_path, **changes))
    assert len(lines) == 1 and expected in lines[0], lines
    assert lines[0].startswith(str(tmp_path / "sweep.yaml"))


def test_a_placeholder_in_the_jobs_own_command_is_checked_too(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(QUICKSTART.read_text().replace("python train.py --steps 60", "python train.py --lr {rate}"))
    lines = problems(write(tmp_path, job=str(job), set={}))
    assert lines == [f"{job}: train.command: the placeholder {{rate}} names no parameter of the space (hidden, lr)"]


def test_a_bad_sweep_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "sweep", "run",
                             str(write(tmp_path, space={"lr": {"low": 2, "high": 1}}))],
                            env={"CVMJOB_HOME": str(home), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                            check=False, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert not home.exists() or not list(home.rglob("*"))  # no store, no study, no job


def test_placeholders_leave_the_shells_braces_alone() -> None:
    text = "python t.py --lr {lr} --home ${HOME} --json '{{\"a\": 1}}'"
    assert placeholders(text) == ["lr"]
    assert render(text, {"lr": 0.1}) == "python t.py --lr 0.1 --home ${HOME} --json '{\"a\": 1}'"


def test_a_parameters_type_follows_from_its_bounds_or_choices() -> None:
    assert Param(low=1, high=8).kind == "int" and Param(low=1, high=8).grid() == list(range(1, 9))
    assert Param(low=0.1, high=0.5).kind == "float" and Param(low=0.1, high=0.5).grid() is None
    assert Param(low=0.0, high=1.0, step=0.25).grid() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert Param(choices=["adam", "sgd"]).kind == "categorical"
    assert Param(low=1, high=100, log=True).kind == "float"


def test_several_objectives_cannot_be_pruned() -> None:
    with pytest.raises(ValueError, match="Optuna prunes single-objective studies only"):
        SweepSpec.model_validate({**GOOD, "objective": [{"metric": "a"}, {"metric": "b", "direction": "maximize"}]})


def test_a_trials_job_name_fits_the_job_names_limit() -> None:
    assert trial_job_name("a" * 40, 1234) == "a" * 34 + "-t1234"


def test_the_schema_command_prints_the_sweep_schema() -> None:
    result = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "schema", "--sweep"],
                            capture_output=True, text=True, check=True)
    schema = json.loads(result.stdout)
    assert {"study", "job", "space", "objective", "trials"} <= set(schema["required"])


def test_the_gpu_example_sweep_loads_too() -> None:
    path = REPO / "sweeps" / "resnet50" / "sweep.yaml"
    spec = load_sweep(path)
    JobTemplate.of(spec, path).check(spec)
    assert spec.objectives[0].metric == "loss" and spec.pruner.type == "asha"


def test_a_grid_too_large_is_refused_by_counting_never_by_listing(tmp_path: Path) -> None:
    # 0..1e12 step 1: listing it exhausted memory while validating (issue 27, item 11).
    space = {"seed": {"low": 0, "high": 1e12, "step": 1}, "lr": {"choices": [0.1, 0.01]}}
    lines = problems(write(tmp_path, space=space, sampler={"type": "grid"}, set={}))
    assert len(lines) == 1, lines
    assert "space.seed: the grid sampler needs every combination listed" in lines[0], lines
    assert "1000000000001 values" in lines[0] and "2000000000002 combinations" in lines[0], lines


def test_a_grid_is_counted_arithmetically() -> None:
    assert Param(low=0, high=1e12, step=1).grid_size() == 10**12 + 1
    assert Param(low=0.0, high=1.0, step=0.25).grid_size() == 5
    assert Param(low=0.1, high=0.5).grid_size() is None
    assert Param(choices=["adam", "sgd"]).grid_size() == 2
