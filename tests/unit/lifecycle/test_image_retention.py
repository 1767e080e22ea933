"""snapshot.keep_last retires older images of the job's name, but only those of jobs this store holds: another
CVMJOB_HOME or CI runner of the same $USER@hostname may have a job of the same name, and its images are its own
(they were deleted: issue 27, item 3)."""

from __future__ import annotations

from orchestrator.contract.tags import TAG_JOB, TAG_NAME, TAG_OWNER, owner
from orchestrator.lifecycle import actions as A
from orchestrator.lifecycle.execute import Next
from orchestrator.providers.tencent import images
from orchestrator.state.store import NewJob
from tests.unit.lifecycle import test_execute
from tests.unit.lifecycle.test_execute import Run, running
from tests.waiting import wait_until

run = test_execute.run  # the fixture: an executor of a quickstart job against the emulator


def test_retention_retires_only_images_of_jobs_this_store_holds(run: Run) -> None:
    instance_id = running(run)
    name = run.executor.spec.name
    job = run.store.get(run.job_id)
    assert job is not None
    earlier = "job-earlier0"  # an earlier job of the same name, in this store
    run.store.create_job(NewJob(job_id=earlier, name=name, spec=job.spec, plan=job.plan, target=job.target,
                                settings=job.settings, deadline=10_000.0, source_dir=job.source_dir), now=50.0)

    def made(job_id: str, label: str) -> str:
        tags = {TAG_JOB: job_id, TAG_NAME: name, TAG_OWNER: owner()}
        image_id = images.create_image(run.sdk, instance_id, f"{name}-{label}", tags)
        run.emulator.admin.advance(60)  # each image older than the next, and ready
        wait_until(label, lambda: any(i.image_id == image_id and i.state.ready
                                      for i in images.find_by_tags(run.sdk, {TAG_JOB: job_id})) or None, 30)
        return image_id

    elsewhere = made("job-elsewhere", "another-homes")  # same name, same owner tag, a job of another store
    oldest_ours = made(earlier, "ours-1")
    newest_ours = made(earlier, "ours-2")

    assert run.executor.run(A.ApplyImageRetention(1)) is Next.CONTINUE
    left = {i.image_id for i in images.find_by_tags(run.sdk, {TAG_NAME: name})}
    assert elsewhere in left, "another home's image was deleted"
    assert oldest_ours not in left and newest_ours in left, left
