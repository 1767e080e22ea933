"""The defects a review found (issue 27), each with the test that failed before its fix and the invariant that
test protects. docs/reliability.md lists them (tests/faults/report.py); tests/faults/test_defects.py checks that
every test named here exists, so the list cannot point at a test that was renamed or removed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Defect:
    item: str  # the review's numbering: "1" .. "11"
    what: str  # what went wrong, as a user met it
    invariant: str  # what holds now
    tests: tuple[str, ...]  # path::function of the tests that failed before the fix (a parametrized one: some cases)


DEFECTS: tuple[Defect, ...] = (
    Defect(
        "2", "a sweep trial's share of the cap was written into its spec after planning, so its controller decided on "
        "the sweep's whole cap",
        "a job's spec, plan and the limit its controller decides on are born from one `limits.max_cost`",
        ("tests/unit/sweep/test_run.py::test_a_trials_share_of_the_cap_is_the_limit_its_controller_decides_on",),
    ),
    Defect(
        "11", "the emulator's admin API answered a body that is not a JSON object with HTTP 500",
        "a malformed admin request is a 400 that says what to send",
        ("tests/emulator/test_admin.py::test_a_body_that_is_not_a_json_object_is_a_bad_request",),
    ),
    Defect(
        "11", "a NUL in `train.env` or `train.command` passed `plan` and failed on a billed instance",
        "what no instance can run is refused at plan, before anything is created",
        ("tests/unit/spec/test_loader.py::test_each_problem_is_one_line_with_field_and_fix",),
    ),
    Defect(
        "11", "a new SQLite store was world-readable, and it holds every job's spec (`train.env` values included)",
        "a store cvmjob creates is readable by its owner only (0600)",
        ("tests/unit/state/test_store.py::test_a_new_sqlite_store_and_its_journal_are_readable_by_their_owner_only",),
    ),
    Defect(
        "3", "`cvmjob gc` took a resource its store did not know but tagged with the same `$USER@hostname` for an "
        "orphan: from a second `CVMJOB_HOME`, a CI runner or a host of the same name it terminated live instances "
        "and deleted other jobs' images; `died_here` took another home's live controller for dead the same way; and "
        "gc stopped with exit 3 at an instance still PENDING, leaving the rest",
        "an owner unknown is not an owner gone: a job the store does not hold is judged by its document in the "
        "region's buckets (see below); a lease holder carries its home's persisted random identity, and only this "
        "home's are judged by their pid; gc waits for an instance TerminateInstances refuses in its state and collects "
        "the rest meanwhile (scenarios `gc-leaves-another-homes-work`, `gc-collects-past-a-pending-instance`)",
        (
            "tests/faults/test_gc.py::test_gc",
            "tests/unit/test_gc.py::test_another_stores_job_is_collected_only_when_its_document_proves_it_ended_or_abandoned",
            "tests/unit/test_gc.py::test_find_orphans_reads_other_stores_documents_in_every_bucket_of_the_region",
            "tests/unit/test_gc.py::test_gc_waits_for_a_pending_instance_and_collects_the_rest_meanwhile",
            "tests/unit/controller/test_drive.py::test_a_holder_of_another_home_with_the_same_owner_is_not_known_dead",
        ),
    ),
)

# Sections of prose docs/reliability.md carries after the defects: (heading, markdown text).
NOTES: tuple[tuple[str, str], ...] = (
    (
        "What `cvmjob gc` collects",
        "Instances and images tagged `cvmjob:job`, judged by their job. A job of this store: once it is terminal. "
        "A job the store does not hold is another store's until proven otherwise (a second `CVMJOB_HOME`, a CI "
        "runner and two hosts of one name share `$USER@hostname`); gc judges only those tagged with its own "
        "`cvmjob:owner`, by the job's `job.json`, which its controller puts in its state bucket from submission on, "
        "looked for in every bucket of the region:\n\n"
        "- it says the job ended: collected;\n"
        "- it says the job is live, and its lease holder is a controller of this home (the random identity in "
        "`$CVMJOB_HOME/identity`) whose process is gone, so this store lost the job: collected once older than "
        "`--grace`;\n"
        "- it says the job is live otherwise (another home drives it, or will): never; its controller, or the "
        "instance's ActionTimer at the job's deadline, ends it;\n"
        "- no bucket holds one (a job of an older release, a deleted state bucket): collected once older than "
        "`--grace`;\n"
        "- a bucket could not be read, or the document is not one this release reads: never (a failed lookup is not "
        "absence).\n\n"
        "A succeeded job's image is its product, whichever store holds the job. An instance TerminateInstances "
        "refuses in its state (PENDING, STARTING, STOPPING, REBOOTING) is looked at again every 2 s, as a job's "
        "teardown does, for as long as a controller waits for a launch stuck in PENDING (15 min), while the rest are "
        "collected; one still refused then is named in one error (exit 3): run `cvmjob gc` again.",
    ),
)
