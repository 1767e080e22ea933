"""What a job's result depends on, as one hash: `cvmjob run --if-changed` reuses a succeeded job that trained on
the same inputs instead of training again.

The inputs: each data prefix's listing (every object's key, size and ETag), the workdir bundle's sha256 (the
archive is byte-for-byte reproducible: bundle.workdir_archive), the normalized spec (after ``--set``), the image
the plan chose and cvmjob's version. The fingerprint is taken at submission and stored with the job; when the job
has succeeded, the data is listed again, and only a job whose data did not change while it trained is entered in
the index (DVC records its hashes after the run, so a change during the run is silently kept as done).

The index lives in the state bucket (``cvmjob/_fingerprints/<digest>.json``), so a CI runner that keeps nothing
between runs finds it. Beside it, ``<digest>.claim.json`` names the job training on these inputs now: put
create-only (``x-cos-forbid-overwrite``) by the runner that submits it, so that a second runner with the same
inputs follows that job instead of training too (api.claim_inputs).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from .. import __version__
from ..contract import FINGERPRINTS_PREFIX, DataDigest, Fingerprint, FingerprintEntry, Unread, decode_doc, too_large
from ..providers.tencent import TencentSdk
from ..providers.tencent.errors import AlreadyExistsError, TransientError
from ..providers.tencent.storage import ObjectStore, ObjectTooLarge
from ..spec.models import JobSpec
from ..staging import bundle
from ..state.home import cvmjob_home


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def canonical(document: Any) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def data_digests(spec: JobSpec, sdk: TencentSdk, regions: Mapping[str, str]) -> list[DataDigest]:
    """Every data entry's listing, hashed: a changed, added or removed object changes its digest. ``regions``:
    the plan's buckets of other regions (Plan.bucket_regions)."""
    digests = []
    for entry in spec.data:
        source = entry.source
        lines, size, count = [], 0, 0
        store = ObjectStore(sdk.for_region(regions.get(source.bucket, sdk.region)), source.bucket)
        for info in store.iter_objects(source.prefix):
            lines.append(f"{info.key}\t{info.size}\t{info.etag}")
            size += info.size
            count += 1
        digests.append(DataDigest(bucket=source.bucket, prefix=source.prefix, objects=count, bytes=size,
                                  sha256=_sha256("\n".join(sorted(lines)))))
    return digests


def workdir_sha256(spec: JobSpec, source_dir: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="cvmjob-fingerprint-") as tmp:
        archive = bundle.workdir_archive((source_dir / spec.workdir).resolve(), Path(tmp) / "w.tgz",
                                         exclude=(cvmjob_home(),))
    return archive.sha256


def take(spec: JobSpec, image_id: str, source_dir: Path, sdk: TencentSdk, regions: Mapping[str, str]) -> Fingerprint:
    return Fingerprint(
        cvmjob_version=__version__,
        spec_sha256=_sha256(canonical(spec.model_dump(mode="json"))),
        workdir_sha256=workdir_sha256(spec, source_dir),
        image_id=image_id,
        data=data_digests(spec, sdk, regions),
    )


def digest(fingerprint: Fingerprint) -> str:
    return _sha256(canonical(fingerprint.model_dump(mode="json")))


def index_key(fingerprint: Fingerprint) -> str:
    return f"{FINGERPRINTS_PREFIX}{digest(fingerprint)}.json"


def changed_data(before: Fingerprint, now: list[DataDigest]) -> list[str]:
    """The data entries whose listing differs from the one taken at submission, as the user would name them."""
    changed = []
    for index, (old, new) in enumerate(zip(before.data, now, strict=True)):
        if old.sha256 != new.sha256:
            changed.append(f"data.{index} (cos://{old.bucket}/{old.prefix}: {old.objects} objects, {old.bytes} bytes "
                           f"at submission, {new.objects} objects, {new.bytes} bytes at the end)")
    return changed


def lookup(state: ObjectStore, fingerprint: Fingerprint) -> FingerprintEntry | None:
    """The succeeded job that trained on these inputs, if the index has one."""
    found = state.get_json(index_key(fingerprint)) if state.bucket_exists() else None
    return None if found is None else FingerprintEntry.model_validate(found)


class Claim(BaseModel):
    """``<digest>.claim.json``: the job a runner submitted to train on these inputs, and when it claimed them."""

    model_config = ConfigDict(extra="forbid")
    job_id: str
    claimed_at: float


_CLAIM_TRIES = 20  # claims of one set of inputs are taken and dropped by its runners only: this many is contention
_CLAIM_LIMIT = 64 * 1024  # a claim is a job id and a time


def claim_key(fingerprint: Fingerprint) -> str:
    return f"{FINGERPRINTS_PREFIX}{digest(fingerprint)}.claim.json"


def claim(state: ObjectStore, fingerprint: Fingerprint, job_id: str, now: float) -> Claim | None:
    """Claims these inputs for ``job_id``: None when claimed, else the claim another runner holds (create-only:
    of two runners, exactly one claims)."""
    key = claim_key(fingerprint)
    for _ in range(_CLAIM_TRIES):
        try:
            state.put_json(key, Claim(job_id=job_id, claimed_at=now).model_dump(mode="json"), create_only=True)
            return None
        except AlreadyExistsError:
            found = _read_claim(state, key)
        if isinstance(found, Claim):
            return found
        if found is not None:
            state.delete([key])  # not a claim (another writer's bytes): nobody's
        # else deleted meanwhile (another runner found it stale): claim it again
    raise TransientError("ClaimContended", f"{key} kept changing while these inputs were claimed")


def drop_claim(state: ObjectStore, fingerprint: Fingerprint, stale: Claim) -> None:
    """Removes a claim whose job ended without an entry in the index (or never came), unless it changed since."""
    key = claim_key(fingerprint)
    if _read_claim(state, key) == stale:
        state.delete([key])


def _read_claim(state: ObjectStore, key: str) -> Claim | Unread | None:
    """The claim at ``key``, None when there is none, or why what is there is not one (any writer of the state
    bucket may have put bytes there)."""
    try:
        data = state.get_bytes(key, limit=_CLAIM_LIMIT)
    except ObjectTooLarge as exc:
        return too_large(key, exc.size, _CLAIM_LIMIT)
    return None if data is None else decode_doc(key, data, Claim, _CLAIM_LIMIT)
