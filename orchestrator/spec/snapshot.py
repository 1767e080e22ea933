"""The snapshot image taken after a successful job, and its name template."""

from __future__ import annotations

import string
from datetime import datetime, timezone
from typing import Annotated

from pydantic import Field, StrictBool, StrictInt, field_validator

from orchestrator.spec.base import SpecModel
from orchestrator.spec.durations import DAY, HOUR, Duration, within

SNAPSHOT_FIELDS = ("name", "job_id", "date", "time", "attempt")
IMAGE_NAME_MAX_LENGTH = 60  # CreateImage's ImageName limit
# Stand-ins for checking a template's length before the job exists. The job id stand-in is as long as the
# job ids the lifecycle is expected to produce; lengthen it if they grow.
EXAMPLE_JOB_ID = "job-1a2b3c4d"
EXAMPLE_ATTEMPT = 99
EXAMPLE_TIME = datetime(2025, 1, 31, 23, 59, 59, tzinfo=timezone.utc)


def render_snapshot_name(template: str, *, name: str, job_id: str, attempt: int, at: datetime) -> str:
    """The image name for ``template``: {date} is YYYYMMDD and {time} HHMMSS, both of ``at``."""
    return template.format(name=name, job_id=job_id, attempt=attempt, date=at.strftime("%Y%m%d"),
                           time=at.strftime("%H%M%S"))


def check_snapshot_template(template: str) -> str:
    """``template`` if it only uses the allowed {fields}, plainly; ValueError says what is wrong."""
    allowed = ", ".join("{" + field + "}" for field in SNAPSHOT_FIELDS)
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"{template!r} is not a valid template ({exc}). use {allowed}; "
                         "write {{ for a literal brace") from None
    for _, field, format_spec, conversion in parts:
        if field is None:
            continue
        if field not in SNAPSHOT_FIELDS:
            raise ValueError(f"{{{field}}} is not a template field. use {allowed}")
        if format_spec or conversion:
            raise ValueError(f"{{{field}}} may not have a format (':' or '!'). write it as {{{field}}}")
    return template


class SnapshotSpec(SpecModel):
    """A custom image of the instance, taken after training succeeds and before it is destroyed."""

    enabled: StrictBool = True
    """Take the snapshot."""
    name: str = Field("{name}-{date}-{job_id}", examples=["{name}-{date}-{job_id}"])
    """Image name template. Fields: {name} (the job's), {job_id}, {date} (YYYYMMDD), {time} (HHMMSS), {attempt}.
    The rendered name must fit in 60 characters."""
    include_data: StrictBool = False
    """Keep the synced data in the image. Off: the image holds what setup installed, not the job's data (data on
    a local NVMe disk is never part of an image, which copies only the system disk)."""
    keep_last: StrictInt = Field(3, ge=1, le=100)
    """Snapshots of this job name kept; older ones are deleted."""
    timeout: Annotated[Duration, within(10, DAY)] = HOUR
    """How long the image may take to become usable. After it the job succeeds without waiting: an image that
    finishes later is still the job's; one that fails is deleted by `cvmjob gc`."""

    @field_validator("name")
    @classmethod
    def _template(cls, template: str) -> str:
        return check_snapshot_template(template)

    def example_name(self, job_name: str) -> str:
        """This template rendered for ``job_name`` with representative values, for checking its length."""
        return render_snapshot_name(self.name, name=job_name, job_id=EXAMPLE_JOB_ID, attempt=EXAMPLE_ATTEMPT,
                                    at=EXAMPLE_TIME)
