"""A spec problem says where it is: ``file:line:col`` of the field in the YAML (its key; a list's item), or the
``--set`` argument that set it, for the job spec and the sweep spec alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.spec import SpecError, load_spec
from orchestrator.spec.yamlfile import read_document
from orchestrator.sweep.spec import load_sweep
from tests.unit.spec.conftest import error_lines

JOB = """\
name: tiny
region: ap-guangzhou
instance: {type: S5.MEDIUM4}
train:
  command: python train.py
  nnodes: NNODES
  env:
    lower: x
disks:
  data:
    - type: CLOUD_SSD
      size_gib: 500
    - {type: CLOUD_SSD, size_gib: 25}
"""


def job(nnodes: int = 1) -> str:
    return JOB.replace("NNODES", str(nnodes))


def test_each_problem_names_the_line_and_column_of_its_field(write_spec: Callable[[str], Path]) -> None:
    path = write_spec(job(nnodes=-1))
    assert error_lines(path) == [
        f"{path}:13:25: disks.data.1.size_gib: 25 is not a multiple of 10",  # in a flow mapping: its key
        f"{path}:6:3: train.nnodes: -1 is out of range. allowed: 1..64",
        f"{path}:8:5: train.env.lower: 'lower' is not a valid variable name: use A-Z, 0-9 and _, not starting with a "
        "digit",
    ]


def test_a_missing_field_is_placed_at_its_mapping_and_a_missing_top_field_at_the_file(
        write_spec: Callable[[str], Path]) -> None:
    path = write_spec("name: tiny\nregion: ap-guangzhou\ninstance:\n  need: {count: 2}\n")
    need, train = error_lines(path)
    assert need.startswith(f"{path}:4:3: instance.need.gpu: set a GPU model (e.g. gpu: T4)")
    assert train == f"{path}: train: required field is missing. e.g. train: {{command: python train.py}}"


def test_an_unknown_field_is_placed_at_its_key(write_spec: Callable[[str], Path]) -> None:
    path = write_spec(job() + "teardown:\n  on_sucess: destroy\n")
    assert f"{path}:15:3: teardown.on_sucess: unknown field. did you mean 'on_success'?" in error_lines(path)


def test_a_problem_of_an_override_names_the_set_argument_and_the_files_own_stay_in_the_file(
        write_spec: Callable[[str], Path]) -> None:
    path = write_spec(job())
    lines = error_lines(path, ["train.nnodes=0", "train.nnodes=-2", "train.comand=x"])
    assert lines == [
        f"{path}:13:25: disks.data.1.size_gib: 25 is not a multiple of 10",
        "--set train.nnodes=-2: train.nnodes: -2 is out of range. allowed: 1..64",  # the last one on the field
        f"{path}:8:5: train.env.lower: 'lower' is not a valid variable name: use A-Z, 0-9 and _, not starting with a "
        "digit",
        "--set train.comand=x: train.comand: unknown field. did you mean 'command'?",
    ]


def test_an_override_inside_a_field_with_a_problem_is_named(write_spec: Callable[[str], Path]) -> None:
    text = job().replace("    lower: x\n", "    LOWER: x\n").replace("size_gib: 25", "size_gib: 30")
    (line,) = error_lines(write_spec(text), ["instance.need={gpu: T4}"])
    assert line.startswith("--set instance.need={gpu: T4}: instance: set exactly one of type")


def test_a_trials_document_has_no_positions_and_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "job.yaml", document={"name": "tiny", "region": "ap-guangzhou",
                                                   "instance": {"type": "S5.MEDIUM4"}, "train": {"command": "x",
                                                                                                  "nnodes": 0}})
    assert str(caught.value) == f"{tmp_path / 'job.yaml'}: train.nnodes: 0 is out of range. allowed: 1..64"


def test_positions_of_keys_items_and_aliases(tmp_path: Path) -> None:
    path = tmp_path / "doc.yaml"
    path.write_text("a:\n  b: 1\n  c: [x, {d: 2}]\nself: &s [*s]\ne: &e {f: 1}\ng: *e\n")
    positions = read_document(path, "doc", []).positions
    assert {key: positions[key] for key in [("a",), ("a", "b"), ("a", "c", "0"), ("a", "c", "1", "d"), ("self",),
                                            ("e", "f"), ("g",)]} == {
        ("a",): (1, 1), ("a", "b"): (2, 3), ("a", "c", "0"): (3, 7), ("a", "c", "1", "d"): (3, 11),
        ("self",): (4, 1), ("e", "f"): (5, 8), ("g",): (6, 1)}
    # An alias is not followed (an anchor may hold itself): its problems are placed at its key.
    assert ("g", "f") not in positions and ("self", "0", "0") not in positions


SWEEP = """\
study: s
job: {job}
space:
  lr: {{low: 0.1, high: 0.01}}
objective: {{metric: val_loss}}
trials: 4
"""


def test_a_sweep_problem_names_its_line_and_column_or_its_set(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(job())
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.format(job="job.yaml"))
    for overrides, expected in [
        ([], f"{path}:4:8: space.lr.low: low (0.1) is above high (0.01). swap them"),
        (["space.lr.high=1", "trials=0"], "--set trials=0: trials: 0 is out of range. allowed: 1..10000"),
    ]:
        with pytest.raises(SpecError) as caught:
            load_sweep(path, overrides)
        assert str(caught.value) == expected


def test_a_sweeps_set_overrides_its_spec(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.format(job="job.yaml"))
    sweep = load_sweep(path, ["space.lr.high=1", "trials=9", "study=night-2"])
    assert (sweep.trials, sweep.study, sweep.space["lr"].high) == (9, "night-2", 1)
