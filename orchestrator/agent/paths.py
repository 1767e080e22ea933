"""Where things live on the instance.

The bootstrap gives the agent one folder per attempt and node (``--workdir``, ``node_home``:
``ROOT/opt/cvmjob/<job>/a<attempt>-n<node>``); everything the agent writes lives there, except the synced
data, which outlives attempts on the same instance (nvme.data_root). ROOT is "/" on Tencent Cloud and the
sandbox's system-disk folder on the emulator (host.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from . import host


def cvmjob_dir() -> Path:
    """Everything of cvmjob's on the system disk, the jobs' folders and (without local NVMe) their data."""
    return host.instance_root() / "opt" / "cvmjob"


def job_dir(job_id: str) -> Path:
    return cvmjob_dir() / job_id


def node_home(job_id: str, attempt: int, node: int) -> Path:
    return job_dir(job_id) / f"a{attempt}-n{node}"


def image_manifest() -> Path:
    """What a custom image made by a job holds (seal.py)."""
    return cvmjob_dir() / "image.json"


def per_boot_script(job_id: str) -> Path:
    """cloud-init runs every script in this folder at every boot (scripts-per-boot): the agent's start."""
    return host.instance_root() / "var" / "lib" / "cloud" / "scripts" / "per-boot" / f"cvmjob-agent-{job_id}.sh"


def cloud_init_traces() -> list[Path]:
    """cloud-init's copies of the UserData (the bootstrap, with its presigned URLs) for the current instance, and
    its logs of the boots that ran it: what ``cloud-init clean --logs`` removes before an image is made."""
    root = host.instance_root()
    instance = root / "var" / "lib" / "cloud" / "instance"
    logs = root / "var" / "log"
    return [instance / "user-data.txt", instance / "user-data.txt.i", instance / "scripts",
            logs / "cloud-init-output.log", logs / "cloud-init.log"]


@dataclass(frozen=True)
class NodePaths:
    home: Path

    @property
    def workdir(self) -> Path:
        """The extracted workdir archive: setup and training run here."""
        return self.home / "workdir"

    @property
    def archive(self) -> Path:
        return self.home / "workdir.tar.gz"

    @property
    def archive_marker(self) -> Path:
        """The ETag of the archive extracted into workdir: a restarted agent does not extract it again."""
        return self.home / "workdir.etag"

    @property
    def run_log(self) -> Path:
        """The agent's log, setup output and training output: the file shipped to logs/<seq>.log."""
        return self.home / "run.log"

    @property
    def logship_state(self) -> Path:
        return self.home / "logship.json"

    @property
    def progress(self) -> Path:
        return self.home / "progress.json"

    @property
    def result(self) -> Path:
        """A local copy of result.json: written before the upload, so a restart can finish the upload."""
        return self.home / "result.json"

    @property
    def training_pid(self) -> Path:
        return self.home / "training.pid"

    def inside_workdir(self, relative: str) -> Path:
        """The spec's checkpoints.dir / outputs.dir: relative to the workdir (the spec forbids '..')."""
        return self.workdir / relative


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def stays_inside(relative: str) -> bool:
    """True when the '/'-separated path, joined to a folder, cannot leave it (archives, object keys)."""
    path = PurePosixPath(relative)
    return bool(relative) and not path.is_absolute() and ".." not in path.parts
