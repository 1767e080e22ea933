from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.spec import CosUri, JobSpec, SpecError, load_spec, spec_to_json
from tests.unit.spec.conftest import FULL_SPEC, MINIMAL_SPEC, error_lines

Problems = Callable[..., list[str]]


def test_full_spec_loads_and_round_trips_through_json(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(FULL_SPEC))

    assert spec.instance.type == "GN7.2XLARGE32"
    assert spec.data[0].source == CosUri("datasets-1250000000", "mnist/")
    assert str(spec.checkpoints.upload_to) == "cos://bucket-1250000000/prefix/"
    assert spec.train.env == {"NCCL_DEBUG": "WARN", "EPOCHS": "3"}
    assert (spec.train.hang_timeout, spec.teardown.keep_for, spec.limits.max_runtime) == (1800, 1800, 5400)
    assert spec.tags["小组"] == "视觉"
    assert JobSpec.model_validate_json(spec_to_json(spec)) == spec


def test_minimal_spec_gets_defaults(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(MINIMAL_SPEC))

    assert spec.billing.mode == "on-demand"
    assert spec.train.nproc_per_node == "auto"
    assert spec.limits.max_runtime == 24 * 3600
    assert spec.policies.recovery == "default"
    assert spec.disks.system.size_gib == 100


def test_gpu_need_instead_of_type(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(MINIMAL_SPEC), ["instance.type=", "instance.need={gpu: A100, count: 8}"])
    assert spec.instance.need is not None and spec.instance.need.count == 8


BERT = "{params: 110_000_000, batch_size: 32, seq_len: 512, hidden_dim: 768, layers: 12}"


def test_a_model_needs_no_gpu_model_and_gets_the_documented_defaults(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(MINIMAL_SPEC), ["instance.type=", f"instance.need={{model: {BERT}}}"])
    need = spec.instance.need
    assert need is not None and need.gpu is None and need.count == 1 and need.model is not None
    assert (need.model.params, need.model.precision, need.model.optimizer, need.model.headroom) == \
        (110_000_000, "fp32", "adam", 0.15)


def test_vgpu_allowed_when_asked(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(MINIMAL_SPEC), ["instance.type=GN7.2XLARGE40", "instance.allow_vgpu=true"])
    assert spec.instance.type == "GN7.2XLARGE40"


# (overrides on FULL_SPEC, the exact line after "<file>: ")
ERROR_CASES = [
    (["trian.command=x"], "trian: unknown field. did you mean 'train'?"),
    (["train.comand=x"], "train.comand: unknown field. did you mean 'command'?"),
    (["train.zzz=1"], "train.zzz: unknown field. valid fields here: command, nproc_per_node, cpu_nproc, nnodes, "
                      "elastic_min_nodes, max_restarts, env, hang_timeout"),
    (["billing.mode=spotted"], "billing.mode: 'spotted' is not one of 'on-demand', 'spot', 'reserved'. "
                               "did you mean 'spot'?"),
    (["teardown.on_failure=kept"], "teardown.on_failure: 'kept' is not one of 'destroy', 'keep'. did you mean 'keep'?"),
    (["instance.type=GN7.2XLARGE40"], "instance.type: GN7.2XLARGE40 is half a T4 (vGPU, 8 GB); for a full T4 use "
                                      "GN7.2XLARGE32, or set instance.allow_vgpu: true"),
    (["instance.alternatives.0=GN7vw.2XLARGE32"],
     "instance.alternatives.0: GN7vw.2XLARGE32 is a rendering vGPU (GN7vw: graphics APIs, not CUDA training); "
     "for a full T4 use GN7.2XLARGE32, or set instance.allow_vgpu: true"),
    (["instance.type=gn7.2xlarge32"], "instance.type: 'gn7.2xlarge32' is not valid: an instance type FAMILY.SIZE "
                                      "(case-sensitive), e.g. GN7.2XLARGE32. did you mean 'GN7.2XLARGE32'?"),
    (["instance.need={gpu: T4}"], "instance: set exactly one of type (e.g. type: GN7.2XLARGE32) or need "
                                  "(e.g. need: {gpu: T4})"),
    (["instance.type=", "instance.need={gpu: A100, count: 3}"],
     "instance.need.count: no instance type has 3 x A100. use one of 1, 2, 4, 8"),
    (["instance.type=", "instance.need={gpu: A10, min_gpu_memory_gib: 32}"],
     "instance.need.min_gpu_memory_gib: each A10 has 24 GiB. choose V100 (32 GiB), A100 (40 GiB)"),
    (["instance.type=", "instance.need={gpu: H100}"],
     "instance.need.gpu: 'H100' is not one of 'T4', 'V100', 'A100', 'A10'. did you mean 'V100'?"),
    (["instance.type=", "instance.need={count: 2}"],
     "instance.need.gpu: set a GPU model (e.g. gpu: T4), or model for the planner to size the GPU from"),
    (["instance.type=", f"instance.need={{count: 3, model: {BERT}}}"],
     "instance.need.count: no instance type has 3 GPUs. use one of 1, 2, 4, 8"),
    (["instance.type=", f"instance.need={{min_gpu_memory_gib: 48, model: {BERT}}}"],
     "instance.need.min_gpu_memory_gib: no GPU here has more than 40 GiB"),
    (["instance.type=", f"instance.need={{model: {BERT}}}", "instance.need.model.precision=fp16"],
     "instance.need.model.precision: 'fp16' is not one of 'fp32', 'amp'"),
    (["instance.type=", f"instance.need={{model: {BERT}}}", "instance.need.model.optimizer=adamm"],
     "instance.need.model.optimizer: 'adamm' is not one of 'adam', 'adamw', 'sgd'. did you mean 'adam'?"),
    (["instance.type=", f"instance.need={{model: {BERT}}}", "instance.need.model.headroom=1.5"],
     "instance.need.model.headroom: 1.5 is out of range. allowed: 0..1"),
    (["instance.type=", "instance.need={model: {params: 110000000, batch_size: 32, seq_len: 512, layers: 12}}"],
     "instance.need.model.hidden_dim: required field is missing. e.g. hidden_dim: 768"),
    (["data.0.source=s3://datasets/mnist/"],
     "data.0.source: 's3://datasets/mnist/' uses s3://, but only COS is supported. "
     "expected cos://<name>-<appid>/<prefix>, e.g. cos://datasets-1250000000/mnist/"),
    (["data.0.source=cos:///mnist/"], "data.0.source: the bucket is missing. expected cos://<name>-<appid>/<prefix>, "
                                      "e.g. cos://datasets-1250000000/mnist/"),
    (["data.0.source=cos://datasets/mnist/"],
     "data.0.source: bucket 'datasets' does not end in -<appid>, your account's APPID (e.g. datasets-1250000000). "
     "expected cos://<name>-<appid>/<prefix>, e.g. cos://datasets-1250000000/mnist/"),
    (["data.0.source='cos://datasets-1250000000/my data/'"],
     "data.0.source: 'cos://datasets-1250000000/my data/' contains whitespace; COS URIs cannot. "
     "expected cos://<name>-<appid>/<prefix>, e.g. cos://datasets-1250000000/mnist/"),
    (["data.0.target=../up"], "data.0.target: '../up' may not contain '..': it must stay inside its directory"),
    (["data.0.target=/abs"], "data.0.target: '/abs' must be a relative path with '/' separators"),
    (["disks.system.size_gib=10"], "disks.system.size_gib: 10 is out of range. allowed: 20..1024"),
    (["disks.data.0.size_gib=-10"], "disks.data.0.size_gib: -10 is out of range. allowed: 10..32000"),
    (["disks.data.0.size_gib=25"], "disks.data.0.size_gib: 25 is not a multiple of 10"),
    (["disks.data.0.type=LOCAL_NVME"],
     "disks.data.0.type: LOCAL_NVME disks come with the instance type and cannot be requested. pick an instance type "
     "that has them (e.g. HCCPNV4h.48XLARGE1024)"),
    (["train.nnodes=-1"], "train.nnodes: -1 is out of range. allowed: 1..64"),
    (["train.nnodes=yes"], "train.nnodes: expected a whole number, got true"),
    (["train.max_restarts=-1"], "train.max_restarts: -1 is out of range. allowed: 0..100"),
    (["limits.max_cost=0"], "limits.max_cost: 0 is out of range. allowed: more than 0"),
    (["train.nproc_per_node=0"], "train.nproc_per_node: 0 is not 'auto' or a whole number >= 1"),
    (["train.elastic_min_nodes=3"], "train.elastic_min_nodes: 3 is more than nnodes (2). use 1..2"),
    (["train.env.CVMJOB_DATA_DIR=/x"], "train.env.CVMJOB_DATA_DIR: 'CVMJOB_DATA_DIR': names starting with CVMJOB_ "
                                       "are set by cvmjob"),
    (["train.env.lower=1"], "train.env.lower: 'lower' is not a valid variable name: use A-Z, 0-9 and _, "
                            "not starting with a digit"),
    (["train.env.DEBUG=on"], "train.env.DEBUG: expected text, got true. quote it so YAML reads it as text, "
                             "e.g. 'yes'"),
    (["train.command=' '"], "train.command: the command is empty. write a shell command, e.g. python train.py"),
    (['train.env.TOKEN="a\\0b"'], "train.env.TOKEN: holds a NUL character (\\0), which no environment variable or "
                                  "command can carry. remove it"),
    (['train.command="python train.py\\0"'], "train.command: holds a NUL character (\\0), which no environment "
                                             "variable or command can carry. remove it"),
    (["train.hang_timeout=1.5h"], "train.hang_timeout: '1.5h' is not a duration. expected a duration like 90s, 30m, "
                                  "2h, 1h30m, 1d or whole seconds (units in the order d, h, m, s)"),
    (["limits.max_runtime=30s"], "limits.max_runtime: 30s is out of range. allowed 1m..30d"),
    (["billing.mode=on-demand"], "billing.spot_max_price: applies to spot billing only. remove it or set mode: spot "
                                 "(mode is on-demand)"),
    (["billing.reserved_pool=gpus"], "billing.reserved_pool: applies to reserved billing only. remove it or set "
                                     "mode: reserved (mode is spot)"),
    (["zones.1=ap-shanghai-4"], "zones.1: ap-shanghai-4 is not in region ap-guangzhou. use a zone of ap-guangzhou, "
                                "e.g. ap-guangzhou-3"),
    (["zones=ap-guangzhou-3"], "zones: expected a list, got 'ap-guangzhou-3'. write it as a list: [ap-guangzhou-3]"),
    (["name=My Job"], "name: 'My Job' is not valid: 1-40 of a-z, 0-9 and '-', starting and ending with a letter or "
                      "digit, e.g. quickstart"),
    (["name=" + "n" * 39],
     "snapshot.name: renders to 61 characters ('" + "n" * 39 + "-20250131-job-1a2b3c4d'), over the 60 an image "
     "name may have. shorten the template (e.g. '{job_id}') or the job name"),
    (["snapshot.name='{name}-{day}'"], "snapshot.name: {day} is not a template field. use {name}, {job_id}, {date}, "
                                       "{time}, {attempt}"),
    (["snapshot.name='{date:%Y}'"], "snapshot.name: {date} may not have a format (':' or '!'). write it as {date}"),
    (["tags.cvmjob:job=x"], "tags.cvmjob:job: tag key 'cvmjob:job' starts with 'cvmjob:', which cvmjob reserves for "
                            "its own tags"),
    (["tags.qcs:x=y"], "tags.qcs:x: tag key 'qcs:x' starts with 'qcs:', which Tencent Cloud reserves"),
    (["tags.项目组=视觉"], "tags.项目组: tag key '项目组' starts with '项目', which Tencent Cloud reserves"),
    (["tags.team=' ml'"], "tags.team: ' ml' may not start or end with a space"),
    (["tags.team=''"], "tags.team: must not be empty"),
    (["credentials=role:"], "credentials: 'role:' is not valid: 'sts' or 'role:<CamRoleName>', e.g. role:cvmjob-train"),
    (["storage.bucket=cvmjob"], "storage.bucket: bucket 'cvmjob' does not end in -<appid>, your account's APPID "
                                "(e.g. cvmjob-1250000000)"),
    (["image.name=Ubuntu"], "image: set one of id (e.g. id: img-487zeit5), name or from_job (a job name), not several"),
    (["image=img-487zeit5"],
     "image: expected a mapping with fields id, name, from_job, gpu_driver, got 'img-487zeit5'"),
    (["outputs.dir=checkpoints"], "outputs.dir: 'checkpoints' is also checkpoints.dir. use different folders"),
    (["data.1={source: 'cos://other-1250000000/', target: mnist}"],
     "data.1.target: 'mnist' is already the target of data.0"),
]


@pytest.mark.parametrize(("overrides", "expected"), ERROR_CASES, ids=[case[1][:40] for case in ERROR_CASES])
def test_each_problem_is_one_line_with_field_and_fix(problems: Problems, overrides: list[str], expected: str) -> None:
    lines = problems(*overrides)

    assert len(lines) == 1
    line = lines[0]
    assert ": " + expected in line
    source = line[: line.index(": " + expected)]
    # The --set that set the field (or holds it, or lies inside it), else where the file has it.
    assert source in {f"--set {override}" for override in overrides} or re.fullmatch(r".*job\.yaml:\d+:\d+", source)
    assert "Traceback" not in line and "pydantic" not in line and "errors.pydantic.dev" not in line


def test_several_problems_one_line_each(problems: Problems) -> None:
    lines = problems("trian.command=x", "billing.mode=spotted", "disks.system.size_gib=0")

    assert [line.split(": ")[1] for line in lines] == ["billing.mode", "disks.system.size_gib", "trian"]


def test_missing_required_fields_show_examples(write_spec: Callable[[str], Path]) -> None:
    lines = error_lines(write_spec("region: ap-guangzhou\n"))

    assert [line.split(": ", 1)[1] for line in lines] == [
        "name: required field is missing. e.g. name: quickstart",
        "instance: required field is missing. e.g. instance: {type: GN7.2XLARGE32}",
        "train: required field is missing. e.g. train: {command: python train.py}",
    ]


@pytest.mark.parametrize(("text", "expected"), [
    ("name: x\nregion: [\n", "job.yaml:3:1: expected the node content, but found '<stream end>' "
                             "(while parsing a flow node)"),
    ("name: a\nregion: b: c\n", "job.yaml:2:10: mapping values are not allowed here"),
    ("name: a\n\tregion: b\n", "job.yaml:2:1: found character '\\t' that cannot start any token"),
    ("name: a\nname: b\n", "job.yaml:2:1: duplicate key 'name'. keep one of them"),
    ("", "job.yaml: the file is empty. a job spec needs at least: name, region, instance, train"),
    ("# only a comment\n", "job.yaml: the file is empty."),
    ("- name: a\n", "job.yaml: the top level must be a mapping of fields (name: value), got a list."),
    ("just text\n", "job.yaml: the top level must be a mapping of fields (name: value), got 'just text'."),
    ("name: " + "[" * 2000 + "]" * 2000 + "\n", "job.yaml: is nested too deeply to be a spec"),
])
def test_file_level_problems(write_spec: Callable[[str], Path], text: str, expected: str) -> None:
    (line,) = error_lines(write_spec(text))
    assert line.removeprefix(str(write_spec("").parent) + "/").startswith(expected)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert error_lines(missing) == [f"{missing}: no such file. check the path of the job spec"]
    assert error_lines(tmp_path) == [f"{tmp_path}: is a folder, not a job spec file"]


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(b"name: \xff\n")
    assert error_lines(path) == [f"{path}: is not UTF-8 text (byte 6)"]


def test_spec_error_is_a_value_error() -> None:
    assert issubclass(SpecError, ValueError)


def test_unhashable_key_is_a_yaml_problem(write_spec: Callable[[str], Path]) -> None:
    (line,) = error_lines(write_spec("{}: x\n"))
    assert line.endswith("job.yaml:1:1: found unhashable key (while constructing a mapping)")
