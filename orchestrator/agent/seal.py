"""Before the snapshot: take off the system disk what belongs to the job and not to the image.

cloud-init runs every per-boot script at every boot, the first boot of an instance launched from a custom image
included (shared/reference/tencent-cloud-api.md §5), so an image that kept the job's per-boot link would start
the old job's agent on every machine made from it, with the job's keys and presigned URLs at hand. What goes:
the per-boot link (first: from then on no boot starts this agent), cloud-init's copies of the UserData (the
bootstrap and its URLs) and its logs of the job's boots, the job's folder (agent.json with its keys, the agent,
logs, the workdir with its checkpoints and outputs, all already in COS) and, unless ``snapshot.include_data``,
the synced data when it is on the system disk. What stays is what setup installed. ``/opt/cvmjob/image.json``
says so, on the disk.

The running agent needs none of it any more: its config, keys and code are in memory, its last logs are
shipped; only result.json is still to be written, and it is written to COS alone (a local copy would be in the
image).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from orchestrator.contract import AgentConfig, ImageContents
from orchestrator.spec.models import JobSpec

from . import host, nvme
from .paths import cloud_init_traces, image_manifest, job_dir, per_boot_script, write_atomically

log = logging.getLogger(__name__)


def seal_for_image(cfg: AgentConfig, spec: JobSpec) -> ImageContents:
    root = host.instance_root()
    removed: list[str] = []
    kept: list[str] = []

    def relative(path: Path) -> str:
        return path.relative_to(root).as_posix()

    def remove(path: Path) -> None:
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        else:
            return
        removed.append(relative(path))

    contents = ImageContents(job_id=cfg.job_id, job_name=cfg.job_name, attempt=cfg.attempt, setup=list(spec.setup))
    try:
        remove(per_boot_script(cfg.job_id))
        for trace in cloud_init_traces():
            remove(trace)
        remove(job_dir(cfg.job_id))
        data = nvme.data_root(cfg.job_id)
        if nvme.on_system_disk() and data.exists():
            if spec.snapshot.include_data:
                kept.append(relative(data))
            else:
                remove(data)
        contents = contents.model_copy(update={"removed": removed, "data": kept})
        write_atomically(image_manifest(), contents.model_dump_json(indent=2).encode())
    except OSError as exc:
        log.exception("could not clean the instance for the image")
        return contents.model_copy(update={"removed": removed, "problem": f"{type(exc).__name__}: {exc}"})
    log.info("cleaned for the image: removed %s; %s", ", ".join(removed) or "nothing", contents.describe())
    return contents
