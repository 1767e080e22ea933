"""`cvmjob download JOB [outputs|checkpoints|logs] [--to DIR]`: a job's results onto this machine, each file
verified (COS's CRC-64, and the manifest's for a checkpoint) and a run cut short resumed where it stopped: a file
already there with the size and ETag recorded in the folder's index is not fetched again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import EXIT_BAD_INPUT
from .lazy import lazy_module, lazy_name
from .options import Abort, Output, check_output

if TYPE_CHECKING:  # loaded at the command's first use: `cvmjob --help` pays for none of it (cli/lazy.py)
    from .. import api
    from ..agent.paths import stays_inside, write_atomically
    from ..contract import JobLayout
    from ..providers.tencent.storage import ObjectInfo, ObjectStore
    from ..state.home import store_url
    from ..state.store import JobRecord, Store
    from . import render
else:
    api = lazy_module("orchestrator.api")
    render = lazy_module("orchestrator.cli.render")
    stays_inside = lazy_name("orchestrator.agent.paths", "stays_inside")
    write_atomically = lazy_name("orchestrator.agent.paths", "write_atomically")
    JobLayout = lazy_name("orchestrator.contract", "JobLayout")
    store_url = lazy_name("orchestrator.state.home", "store_url")
    Store = lazy_name("orchestrator.state.store", "Store")

INDEX = ".cvmjob-download.json"  # per target folder: key -> [size, etag] of what was fetched and verified


class What(str, Enum):
    outputs = "outputs"
    checkpoints = "checkpoints"
    logs = "logs"


@dataclass(frozen=True)
class Wanted:
    store: ObjectStore
    key: str
    path: str  # under the target folder, '/'-separated
    crc64: int | None = None  # what the manifest says the file's CRC-64 is (checkpoints)
    listed: ObjectInfo | None = None  # the object as a listing showed it: no HEAD needed before its GET


def wanted(job: JobRecord, what: What) -> Iterator[Wanted]:
    """Each object of ``what`` and where it goes under the target folder."""
    if what == What.logs:
        store, layout = api.state_store(job), JobLayout(job.job_id)
        for attempt in range(1, job.attempt + 1):
            for node in range(job.plan.nnodes):
                prefix = layout.logs_prefix(attempt, node)
                for info in store.iter_objects(prefix):
                    yield Wanted(store, info.key, f"attempt-{attempt}/node-{node}/{info.key[len(prefix):]}",
                                 listed=info)
        return
    if what == What.outputs:
        store, place = api.result_place(job, "outputs")
        for info in store.iter_objects(place.prefix):
            if not info.key.endswith("/"):
                yield Wanted(store, info.key, info.key[len(place.prefix):], listed=info)
        return
    store, place = api.result_place(job, "checkpoints")
    manifest = api.checkpoint_manifest(job, store.sdk)
    for entry in [] if manifest is None else manifest.checkpoints:  # complete ones only: what the manifest lists
        for path, crc in entry.files.items():
            yield Wanted(store, f"{place.prefix}{entry.name}/{path}", f"{entry.name}/{path}", crc)


def _read_index(path: Path) -> dict[str, list[object]]:
    """What an earlier run fetched into this folder; an index that is not ours to read (damaged, edited) is
    ignored, which costs only fetching again what it listed."""
    if not path.exists():
        return {}
    try:
        index = json.loads(path.read_text())
    except (ValueError, OSError):
        return {}
    return index if isinstance(index, dict) else {}


def download(job: JobRecord, what: What, to: Path) -> tuple[int, int, int]:
    """Fetch ``what`` of ``job`` into ``to``: (files fetched, files already there, bytes fetched)."""
    index_path = to / INDEX
    index = _read_index(index_path)
    fetched = kept = nbytes = 0
    for item in wanted(job, what):
        if not stays_inside(item.path):
            raise Abort(f"{item.key}: its name would land outside {to}; not downloaded", 1)
        dest = to / item.path
        head = item.listed or item.store.head(item.key)
        if head is None:
            continue  # gone since the manifest was read (a newer checkpoint replaced it)
        if index.get(item.key) == [head.size, head.etag] and dest.is_file() and dest.stat().st_size == head.size:
            kept += 1
            continue
        # The file appears only once COS's CRC-64 matched; a listed object that fits one GET costs no HEAD.
        got = item.store.download_file(item.key, dest, listed=item.listed)
        if item.crc64 is not None and got.crc64 is not None and int(got.crc64) != item.crc64:
            dest.unlink()
            raise Abort(f"{item.key}: its CRC-64 is not the one the checkpoint manifest lists; not kept", 1)
        index[item.key] = [got.size, got.etag]
        write_atomically(index_path, json.dumps(index).encode())  # after each file: a cut run resumes here
        fetched, nbytes = fetched + 1, nbytes + got.size
    return fetched, kept, nbytes


def download_command(
    job: Annotated[Optional[str], typer.Argument(help="job id (or a unique prefix, or the job name); "  # noqa: UP045
                                                      "default: the newest job")] = None,
    what: Annotated[What, typer.Argument(help="outputs, checkpoints (the complete ones) or logs")] = What.outputs,
    to: Annotated[Optional[Path], typer.Option("--to", help="the folder (default: ./<job id>/<what>)")] = None,  # noqa: UP045
    output: Output = "text",
) -> None:
    """Download a job's outputs, checkpoints or logs, verified; run it again to resume a cut download."""
    check_output(output)
    store = Store(store_url())
    newest = None if job else next(iter(store.list_jobs()), None)
    if not job and newest is None:
        raise Abort("no jobs yet: `cvmjob run job.yaml` starts one", EXIT_BAD_INPUT)
    record = newest or api.find_job(store, job or "")
    target = to or Path(record.job_id) / what.value
    target.mkdir(parents=True, exist_ok=True)
    fetched, kept, nbytes = download(record, what, target)
    if output == "json":
        render.print_json({"job_id": record.job_id, "what": what.value, "to": str(target), "fetched": fetched,
                           "already_there": kept, "bytes": nbytes})
    elif fetched + kept == 0:
        render.console.print(f"{record.job_id} has no {what.value} yet", markup=False)
    else:
        render.console.print(f"{what.value} of {record.job_id} in {target}: {fetched} file(s) fetched "
                             f"({nbytes / 1e6:.1f} MB), {kept} already there", markup=False)
