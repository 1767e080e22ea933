"""Custom images: a captured copy of an instance's system disk, under ``<state-dir>/images/<image-id>/``.

CreateImage is asynchronous (SDK docstring: poll DescribeImages): the image is CREATING until both the copy has
finished and ``image_seconds`` have passed on the cloud clock, then NORMAL; a failed copy ends CREATEFAILED.
The quota is 500 custom images per region (latest CreateImage docstring, §2.6).

Injected capture faults (runtime/faults.py): a capture that "fails" ends CREATEFAILED at once, one that "hangs"
stays CREATING while the faults hold it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..catalog import PUBLIC_IMAGES
from ..errors import ApiError
from ..ids import new_id
from ..runtime.background import Background
from ..runtime.copytree import CopyJob
from ..runtime.faults import Faults
from .records import Image, Instance, dump, load

IMAGE_QUOTA = 500
IMAGE_NAME_MAX = 60
PUBLIC_BY_ID = {image["ImageId"]: image for image in PUBLIC_IMAGES}

CREATING, NORMAL, CREATEFAILED = "CREATING", "NORMAL", "CREATEFAILED"


class Images:
    def __init__(
        self, root: Path, now: Callable[[], float], image_seconds: float, faults: Faults, background: Background
    ) -> None:
        self.root = root
        self.records: dict[str, Image] = {}
        self._now = now
        self._image_seconds = image_seconds
        self._faults = faults
        self._background = background
        self._jobs: dict[str, CopyJob] = {}
        root.mkdir(parents=True, exist_ok=True)

    def tree(self, image_id: str) -> Path:
        return self.root / image_id

    def in_region(self, region: str) -> list[Image]:
        return [i for i in self.records.values() if i.region == region]

    def launchable(self, region: str, image_id: str) -> tuple[str, str, Path | None]:
        """(OS name, platform, tree to copy or None for a public image) of an image to launch from."""
        public = PUBLIC_BY_ID.get(image_id)
        if public is not None:
            return public["OsName"], public["Platform"], None
        image = self.records.get(image_id)
        if image is None or image.region != region:
            raise ApiError("InvalidImageId.NotFound", f"The image `{image_id}` does not exist.")
        if image.state != NORMAL:
            raise ApiError(
                "InvalidParameterValue.InvalidImageState", f"The image `{image_id}` is {image.state}, not NORMAL."
            )
        return image.os_name, image.platform, self.tree(image_id)

    def check_new(self, region: str, name: str) -> None:
        if not name or len(name) > IMAGE_NAME_MAX:
            raise ApiError("InvalidParameter.ValueTooLarge", f"ImageName must be 1 to {IMAGE_NAME_MAX} characters.")
        mine = self.in_region(region)
        if any(i.name == name for i in mine):
            raise ApiError("InvalidImageName.Duplicate", f"An image named `{name}` already exists.")
        if len(mine) >= IMAGE_QUOTA:
            raise ApiError("ImageQuotaLimitExceeded", f"The region holds {IMAGE_QUOTA} custom images already.")

    def create(
        self, instance: Instance, platform: str, system_dir: Path, name: str, description: str,
        tags: list[dict[str, str]], request_id: str, now: float,
    ) -> Image:
        self.check_new(instance.region, name)
        image = Image(
            image_id=new_id("img"),
            region=instance.region,
            name=name,
            description=description,
            state=CREATING,
            created_at=now,
            ready_at=now + self._image_seconds,
            source_instance_id=instance.instance_id,
            source_dir=str(system_dir),
            os_name=instance.os_name,
            platform=platform,
            size_gib=int(instance.system_disk["DiskSize"]),
            tags=tags,
            request_id=request_id,
        )
        self.records[image.image_id] = image
        if self._faults.capture_fault(image.image_id) == "fail":
            image.copy_done_at, image.error = now, "Injected fault: the capture failed."
            return image
        self._jobs[image.image_id] = CopyJob(system_dir, self.tree(image.image_id), self._now)
        return image

    def creating_from(self, instance_id: str) -> bool:
        return any(i.state == CREATING and i.source_instance_id == instance_id for i in self.records.values())

    def delete(self, region: str, image_ids: list[str], dry_run: bool = False) -> None:
        for image_id in image_ids:  # all checked before any is deleted
            if image_id in PUBLIC_BY_ID:
                raise ApiError("InvalidParameterValue.InvalidImageId", f"`{image_id}` is a public image.")
            image = self.records.get(image_id)
            if image is None or image.region != region:
                raise ApiError("InvalidImageId.NotFound", f"The image `{image_id}` does not exist.")
            if image.state == CREATING:
                raise ApiError("InvalidImageId.IncorrectState", f"The image `{image_id}` is still CREATING.")
        if dry_run:
            return
        for image_id in image_ids:
            del self.records[image_id]
            self._background.delete(self.tree(image_id))

    def tick(self, now: float) -> list[Image]:
        """Images that left CREATING."""
        settled = []
        for image in self.records.values():
            if image.state != CREATING:
                continue
            job = self._jobs.get(image.image_id)
            if job is not None and job.done:
                del self._jobs[image.image_id]
                image.copy_done_at, image.error = job.finished_at, job.error or ""
            if image.error:
                image.state = CREATEFAILED
            elif (
                image.copy_done_at is not None
                and now >= max(image.ready_at, image.copy_done_at)
                and not self._faults.holds(image.image_id)
            ):
                image.state = NORMAL
            else:
                continue
            settled.append(image)
        return settled

    def shutdown(self) -> None:
        for job in self._jobs.values():
            job.join()
        self.tick(self._now())

    def discard(self) -> None:
        """A reset: every image tree goes. Captures finish first (a copy still running would recreate its
        directory in the next account's root)."""
        for job in self._jobs.values():
            job.join()
        self._background.delete(self.root)

    def to_state(self) -> list[dict[str, Any]]:
        return [dump(i) for i in self.records.values()]

    def restore(self, state: list[dict[str, Any]]) -> None:
        """A capture cut short by a restart starts over if its instance's disk is still there."""
        for item in state:
            image = load(Image, item)
            self.records[image.image_id] = image
            if image.state == CREATING and image.copy_done_at is None:
                source = Path(image.source_dir)
                if source.is_dir():
                    self._jobs[image.image_id] = CopyJob(source, self.tree(image.image_id), self._now)
                else:
                    image.error = "the instance's system disk went away during the capture"
