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
)

# Sections of prose docs/reliability.md carries after the defects: (heading, markdown text).
NOTES: tuple[tuple[str, str], ...] = ()
