"""A job's fingerprint against the emulator's COS: it changes with any one input (a data object, a workdir file,
a spec field, the image) and only with one; the index answers only for a fingerprint it holds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from qcloud_cos import CosS3Client

from orchestrator.ci import fingerprint
from orchestrator.contract import Fingerprint, FingerprintEntry, Location
from orchestrator.providers.tencent import StaticCredential, TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.spec import load_spec
from tests.emulator.conftest import REGION, make_cos
from tests.emulator_process import EmulatorProcess

REPO = Path(__file__).resolve().parents[3]
DATA = "cvmjob-data-1250000000"
IMAGE = "img-487zeit5"


def sdk_for(emulator: EmulatorProcess) -> TencentSdk:
    return TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), REGION, emulator.endpoint,
                      emulator.appid)


def job_folder(tmp_path: Path) -> Path:
    """A copy of the quickstart's folder (its spec and workdir)."""
    folder = tmp_path / "job"
    shutil.copytree(REPO / "jobs" / "quickstart", folder, ignore=shutil.ignore_patterns("dataset", "__pycache__"))
    return folder


def taken(emulator: EmulatorProcess, folder: Path, *overrides: str) -> Fingerprint:
    """The fingerprint of the job in ``folder`` reading cos://DATA/set/."""
    spec = load_spec(folder / "job.yaml", [f"data.0.source=cos://{DATA}/set/", *overrides])
    return fingerprint.take(spec, IMAGE, folder, sdk_for(emulator), {})


def put(cos: CosS3Client, key: str, body: bytes) -> None:
    cos.put_object(Bucket=DATA, Key=key, Body=body)


def test_each_input_changes_the_fingerprint_and_nothing_else_does(emulator: EmulatorProcess, tmp_path: Path) -> None:
    cos = make_cos(emulator)
    cos.create_bucket(Bucket=DATA)
    put(cos, "set/a.bin", b"a" * 10)
    put(cos, "set/b.bin", b"b" * 20)
    put(cos, "other/c.bin", b"c")  # outside the prefix
    folder = job_folder(tmp_path)
    first = taken(emulator, folder)
    assert first.data[0].objects == 2 and first.data[0].bytes == 30
    assert fingerprint.digest(taken(emulator, folder)) == fingerprint.digest(first)  # taken again: the same

    put(cos, "other/c.bin", b"changed")  # not the job's data
    assert fingerprint.digest(taken(emulator, folder)) == fingerprint.digest(first)

    put(cos, "set/b.bin", b"B" * 20)  # same size, new content: a new ETag
    changed = taken(emulator, folder)
    assert changed.data != first.data and changed.workdir_sha256 == first.workdir_sha256
    assert fingerprint.changed_data(first, changed.data) == [
        f"data.0 (cos://{DATA}/set/: 2 objects, 30 bytes at submission, 2 objects, 30 bytes at the end)"]

    script = folder / "train.py"
    script.write_text(script.read_text() + "\n# one line more\n")
    edited = taken(emulator, folder)
    assert edited.workdir_sha256 != changed.workdir_sha256 and edited.spec_sha256 == changed.spec_sha256

    field = taken(emulator, folder, "train.command=python train.py --steps 61")
    assert field.spec_sha256 != edited.spec_sha256 and field.workdir_sha256 == edited.workdir_sha256
    other_image = fingerprint.take(load_spec(folder / "job.yaml", [f"data.0.source=cos://{DATA}/set/"]),
                                   "img-other", folder, sdk_for(emulator), {})
    assert len({fingerprint.digest(f) for f in (first, changed, edited, field, other_image)}) == 5


def test_the_secrets_names_are_an_input_and_their_values_are_not(emulator: EmulatorProcess, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cos = make_cos(emulator)
    cos.create_bucket(Bucket=DATA)
    put(cos, "set/a.bin", b"a")
    folder = job_folder(tmp_path)
    plain = taken(emulator, folder)
    monkeypatch.setenv("WANDB_API_KEY", "first-value")
    named = taken(emulator, folder, "secrets=[WANDB_API_KEY]")
    monkeypatch.setenv("WANDB_API_KEY", "second-value")
    assert fingerprint.digest(named) != fingerprint.digest(plain)  # a job that gets a token is another job
    assert fingerprint.digest(taken(emulator, folder, "secrets=[WANDB_API_KEY]")) == fingerprint.digest(named)
    assert "first-value" not in named.model_dump_json()


def test_the_index_answers_for_the_fingerprint_it_holds(emulator: EmulatorProcess, tmp_path: Path) -> None:
    cos = make_cos(emulator)
    cos.create_bucket(Bucket=DATA)
    put(cos, "set/a.bin", b"a")
    folder = job_folder(tmp_path)
    first = taken(emulator, folder)
    state = ObjectStore(sdk_for(emulator), f"cvmjob-ap-guangzhou-{emulator.appid}")
    assert fingerprint.lookup(state, first) is None  # no state bucket yet
    state.create_bucket()
    entry = FingerprintEntry(job_id="job-1", name="quickstart", finished_at=1.0, fingerprint=first,
                             outputs=Location(bucket=state.bucket, prefix="cvmjob/job-1/outputs/"),
                             metrics={"val_loss": 0.3})
    state.put_json(fingerprint.index_key(first), entry.model_dump(mode="json"))
    assert fingerprint.lookup(state, first) == entry
    put(cos, "set/a.bin", b"b")
    assert fingerprint.lookup(state, taken(emulator, folder)) is None


def test_a_claim_that_is_not_one_is_nobodys_and_the_inputs_are_claimed_again(emulator: EmulatorProcess,
                                                                             tmp_path: Path) -> None:
    # Any writer of the state bucket may put bytes at a claim's key: json.loads of them escaped as a traceback.
    cos = make_cos(emulator)
    cos.create_bucket(Bucket=DATA)
    put(cos, "set/a.txt", b"a")
    inputs = taken(emulator, job_folder(tmp_path))
    state = ObjectStore(sdk_for(emulator), DATA)
    key = fingerprint.claim_key(inputs)
    for garbage in (b"\x00 not json", b'{"job_id": 7}', b" " * (64 * 1024 + 1)):
        put(cos, key, garbage)
        assert fingerprint.claim(state, inputs, "job-00000001", 10.0) is None  # claimed, the garbage gone
        held = fingerprint.claim(state, inputs, "job-00000002", 11.0)
        assert held is not None and held.job_id == "job-00000001"
        put(cos, key, garbage)
        fingerprint.drop_claim(state, inputs, held)  # what is there is not the claim it was told to drop
        assert state.get_bytes(key) == garbage
