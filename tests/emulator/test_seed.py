"""Seeding example data (admin ``POST /_emulator/seed``, ``AdminClient.seed``, ``python -m orchestrator.emulator
seed`` and ``cvmjob emulator seed``, which parse alike): the objects are what the official COS SDK reads back, with
the ETag and CRC-64 a PUT of the same bytes gets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from qcloud_cos import CosS3Client

from orchestrator.emulator.client import AdminError
from orchestrator.emulator.keys import KEY_VARIABLE
from orchestrator.emulator.launcher import proxy_free_environment
from tests.emulator.test_cos import read
from tests.emulator_process import EmulatorProcess

FILES = {"b.txt": b"bee\n", "a/deep/c.bin": bytes(range(256)) * 5000, "a/empty": b""}


def example(tmp_path: Path) -> Path:
    folder = tmp_path / "example"
    for name, data in FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def test_seed_creates_the_bucket_and_puts_every_file_as_a_put_would(
    emulator: EmulatorProcess, cos: CosS3Client, tmp_path: Path
) -> None:
    bucket = f"seeded-{emulator.appid}"
    done = emulator.admin.seed(bucket, "quickstart/", example(tmp_path))
    assert done == {"bucket": bucket, "prefix": "quickstart/", "files": 3,
                    "bytes": sum(map(len, FILES.values())), "skipped": False}
    cos.head_bucket(Bucket=bucket)
    listed = [o["Key"] for o in cos.list_objects(Bucket=bucket)["Contents"]]
    assert listed == sorted(f"quickstart/{name}" for name in FILES)
    for name, data in FILES.items():
        body, got = read(cos, bucket, f"quickstart/{name}")
        put = cos.put_object(Bucket=bucket, Key=f"put/{name}", Body=data)
        assert body == data
        assert (got["ETag"], got["x-cos-hash-crc64ecma"]) == (put["ETag"], put["x-cos-hash-crc64ecma"])


def test_seed_into_a_prefix_that_holds_objects_is_skipped_unless_forced(
    emulator: EmulatorProcess, cos: CosS3Client, bucket: str, tmp_path: Path
) -> None:
    cos.put_object(Bucket=bucket, Key="data/old", Body=b"old")
    folder = example(tmp_path)
    assert emulator.admin.seed(bucket, "data/", folder)["skipped"] is True
    assert [o["Key"] for o in cos.list_objects(Bucket=bucket)["Contents"]] == ["data/old"]
    assert emulator.admin.seed(bucket, "elsewhere/", folder)["files"] == 3  # another prefix is empty
    forced = emulator.admin.seed(bucket, "data/", folder, only_if_empty=False)
    assert (forced["files"], forced["skipped"]) == (3, False)
    assert len(cos.list_objects(Bucket=bucket, Prefix="data/")["Contents"]) == 4


@pytest.mark.parametrize(
    ("bucket", "folder", "message"),
    [
        ("ok-1250000000", "missing", "does not exist"),
        ("ok-1250000000", "file", "is not a directory"),
        ("ok-1250000000", "relative", "must be an absolute path"),
        ("Not_A_Bucket-1250000000", "example", "is not BucketName-APPID"),
        ("other-1000000000", "example", "is not this account's"),
        ("x" * 60 + "-1250000000", "example", "at most 60 characters"),
    ],
)
def test_bad_seed_input_is_a_400_with_a_clear_message(
    emulator: EmulatorProcess, cos: CosS3Client, tmp_path: Path, bucket: str, folder: str, message: str
) -> None:
    (tmp_path / "file").write_text("not a folder")
    example(tmp_path)
    path = {"missing": tmp_path / "missing", "file": tmp_path / "file", "relative": Path("example"),
            "example": tmp_path / "example"}[folder]
    with pytest.raises(AdminError) as err:
        emulator.admin.seed(bucket, "p/", path)
    assert err.value.status == 400 and message in err.value.detail, err.value
    assert not cos.bucket_exists(Bucket="ok-1250000000")  # everything is checked before anything changes


FRONTS = {"python -m orchestrator.emulator": ["orchestrator.emulator"], "cvmjob": ["orchestrator.cli.main", "emulator"]}


@pytest.fixture(params=list(FRONTS))
def front(request: pytest.FixtureRequest) -> list[str]:
    return FRONTS[request.param]


def seed_cli(endpoint: str, *args: str, key: str | None = None,
             front: list[str]) -> subprocess.CompletedProcess[str]:
    """The seed command, given ``key`` in its environment (as a user keeps it off the command line)."""
    env = {k: v for k, v in proxy_free_environment().items() if k not in (KEY_VARIABLE, "CVMJOB_ENDPOINT")}
    return subprocess.run(
        [sys.executable, "-m", *front, "seed", "--endpoint", endpoint, *args],
        capture_output=True, text=True, timeout=60, check=False, env=env | ({KEY_VARIABLE: key} if key else {}),
    )


def test_the_seed_command(emulator: EmulatorProcess, cos: CosS3Client, tmp_path: Path, front: list[str]) -> None:
    folder = str(example(tmp_path))
    url = f"cos://cli-{emulator.appid}/q{len(front)}/"  # a prefix of its own for each front
    first = seed_cli(emulator.endpoint, folder, url, key=emulator.secret_key, front=front)
    assert (first.returncode, first.stdout, first.stderr) == (
        0, f"seeded 3 files ({sum(map(len, FILES.values()))} bytes) into {url}\n", "")
    assert read(cos, f"cli-{emulator.appid}", f"q{len(front)}/b.txt")[0] == b"bee\n"
    again = seed_cli(emulator.endpoint, folder, url, key=emulator.secret_key, front=front)
    assert again.stdout == f"{url} already holds objects: nothing seeded (--force to seed anyway)\n"
    forced = seed_cli(emulator.endpoint, folder, url, "--force", "--secret-key-file", str(emulator.state_dir /
                                                                                       "secret_key"), front=front)
    assert forced.stdout.startswith("seeded 3 files"), forced.stderr
    as_json = seed_cli(emulator.endpoint, folder, url, "-o", "json", key=emulator.secret_key, front=front)
    assert json.loads(as_json.stdout) == {"destination": url, "seeded": False, "files": 0, "bytes": 0}, as_json
    wrong = tmp_path / "wrong.key"
    wrong.write_text("w" * 32)
    wrong.chmod(0o600)
    for args, key, error in [
        ((folder, "s3://b/p/"), emulator.secret_key, "error: 's3://b/p/' is not cos://BUCKET/PREFIX/\n"),
        ((str(tmp_path / "missing"), url), emulator.secret_key,
         f"error: folder {tmp_path / 'missing'} does not exist\n"),
        ((folder, "cos://Bad_Name-1/p/"), emulator.secret_key, "error: bucket 'Bad_Name-1': "),
        ((folder, url, "--secret-key-file", str(wrong)), None,
         "error: admin calls need 'Authorization: Bearer <SecretKey>'\n"),
        ((folder, url), "w" * 32, "error: admin calls need 'Authorization: Bearer <SecretKey>'\n"),
        ((folder, url), None, f"error: no key for the emulator at {emulator.endpoint}: "),
        ((folder, url, "--secret-key", emulator.secret_key), None, "error: --secret-key puts the key where every "),
    ]:
        bad = seed_cli(emulator.endpoint, *args, key=key, front=front)
        assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.startswith(error), bad
        assert bad.stderr.count("\n") == 1
    unreachable = seed_cli("127.0.0.1:1", folder, url, key=emulator.secret_key, front=front)
    assert unreachable.returncode == 2
    assert unreachable.stderr.startswith("error: cannot reach the emulator at 127.0.0.1:1: ")
