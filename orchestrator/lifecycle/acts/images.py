"""The custom image of a job's instance: creating it once, keeping the newest of its name, discarding one."""

from __future__ import annotations

from datetime import datetime, timezone

from ...contract.tags import TAG_JOB, TAG_NAME, TAG_OWNER, owner
from ...providers.tencent import images
from ...providers.tencent.errors import CloudError
from ...providers.tencent.retry import retrying
from ...providers.tencent.vocabulary import ImageState
from ...spec.snapshot import render_snapshot_name
from ...state.store import ImageRecord
from ..actions import (
    ApplyImageRetention,
    CreateImage,
    DiscardImage,
)
from .base import ExecutorBase, Next, PermanentFailure


class Images(ExecutorBase):
    """CreateImage, ApplyImageRetention, DiscardImage."""

    def _create_image(self, action: CreateImage) -> Next:
        job = self.job()
        existing = retrying(lambda: images.find_by_tags(self.sdk, {TAG_JOB: self.job_id}))
        if existing:  # created before a crash: adopt it
            image_id, name = existing[0].image_id, existing[0].name
        else:
            instance = next(
                (n.instance_id for n in self.store.nodes(self.job_id, job.attempt) if n.node == 0 and n.instance_id),
                None,
            )
            if instance is None:
                raise PermanentFailure("no instance to image")
            name = render_snapshot_name(
                self.spec.snapshot.name,
                name=self.spec.name,
                job_id=self.job_id,
                attempt=job.attempt,
                at=datetime.fromtimestamp(self.now(), timezone.utc),
            )
            tags = {**self.spec.tags, TAG_JOB: self.job_id, TAG_NAME: self.spec.name, TAG_OWNER: owner()}
            try:
                image_id = retrying(lambda: images.create_image(self.sdk, instance, name, tags))
            except CloudError as exc:
                self.emit("image", f"CreateImage failed ({exc.code}); finishing without an image")
                self.store.update(self.job_id, self.token, self.now(), image_error=f"{exc.code}: {exc.message}")
                return Next.LOOK_AGAIN
        record = ImageRecord(image_id, self.job_id, name, ImageState.CREATING, self.now(), None)
        self.store.put_image(self.token, record)
        self.store.update(self.job_id, self.token, self.now(), image_id=image_id)
        self.emit("image", f"creating image {image_id} ({name})")
        return Next.LOOK_AGAIN

    def _apply_image_retention(self, action: ApplyImageRetention) -> Next:
        job = self.job()
        # Only images of jobs this store holds: $USER@hostname is shared by a second CVMJOB_HOME, a CI runner or a
        # host of the same name, whose job of the same name made its own images (they were deleted).
        named = retrying(lambda: images.find_by_tags(self.sdk, {TAG_NAME: self.spec.name, TAG_OWNER: owner()}))
        known = self.store.get_many({i.tags.get(TAG_JOB, "") for i in named})
        ready = sorted((i for i in named if i.state.ready and i.tags.get(TAG_JOB) in known), key=lambda i: i.created_at)
        doomed = [i for i in ready[: max(0, len(ready) - action.keep_last)] if i.image_id != job.image_id]
        if doomed:
            try:
                retrying(lambda: images.delete(self.sdk, [i.image_id for i in doomed]))
            except CloudError as exc:
                self.emit("image", f"could not delete old images ({exc.code}); `cvmjob gc` will")
                return Next.CONTINUE
            for image in doomed:
                self.emit("image", f"deleted old image {image.image_id} ({image.name}), keeping {action.keep_last}")
        return Next.CONTINUE

    def _discard_image(self, action: DiscardImage) -> Next:
        try:
            retrying(lambda: images.delete(self.sdk, [action.image_id]))
        except CloudError as exc:
            self.emit("image", f"could not delete the failed image {action.image_id} ({exc.code}); `cvmjob gc` will")
            return Next.CONTINUE
        self.emit("image", f"deleted the failed image {action.image_id}")
        return Next.CONTINUE
