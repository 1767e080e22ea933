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
        "5", "every emulator took one published SecretKey, also the admin API's bearer: any local user could run code "
        "as the emulator's user (RunInstances' UserData), read any of its files (admin `seed`, 0600 ones too) and "
        "every STS key issued (a world-readable state directory); a key given by hand went on the command line",
        "each emulator has a random key of its own in a 0600 file of a 0700 state directory (or one its operator "
        "gives by file or environment, never argv); the admin API takes that key only; `seed` reads only under the "
        "roots given at start; a non-loopback address needs a key given on purpose",
        (
            "tests/emulator/test_shared_host.py::test_a_random_key_per_emulator_in_a_0600_file_of_a_0700_state_directory",
            "tests/emulator/test_shared_host.py::test_a_wrong_key_cannot_use_the_admin_api",
            "tests/emulator/test_shared_host.py::test_the_key_is_on_no_command_line_given_by_environment_or_by_file",
            "tests/emulator/test_shared_host.py::test_a_key_on_the_command_line_or_in_a_file_others_can_read_is_refused",
            "tests/emulator/test_shared_host.py::"
            "test_the_default_bind_is_loopback_and_another_address_needs_a_key_given_on_purpose",
            "tests/emulator/test_shared_host.py::test_seeding_outside_the_roots_given_at_start_is_refused_and_reads_nothing",
            "tests/unit/target/test_embedded.py::"
            "test_its_key_is_its_own_private_and_off_every_command_line_and_it_seeds_only_under_home_or_cwd",
        ),
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
            "tests/unit/state/test_home_holders.py::test_a_holder_of_another_home_with_the_same_owner_is_not_known_dead",
        ),
    ),
    Defect(
        "4", "a `status.json` that was not JSON killed `cvmjob run` with a traceback and left the instance billing "
        "(the controller service dropped and took back the job every round; `status` and `sweep run` crashed too); "
        "one of the wrong shape went unsaid, and a `result.json` of another attempt (or instance) was taken for the "
        "node's: the training, which holds keys that can write them, could end its job",
        "an agent document is taken only when it decodes as this layout's and names the attempt, node and instance "
        "the controller expects there; anything else is as good as absent, said once in the job's events",
        (
            "tests/faults/test_agent_documents.py::test_agent_documents",
            "tests/unit/lifecycle/test_observe.py::test_a_status_that_is_not_the_nodes_is_as_good_as_absent_and_says_why",
            "tests/unit/lifecycle/test_observe.py::test_a_result_of_another_attempt_is_not_taken_for_this_ones",
            "tests/unit/test_agent_documents.py::"
            "test_a_document_that_is_not_this_nodes_is_taken_as_absent_with_its_reason",
        ),
    ),
    Defect(
        "11", "agent documents were read whole whatever their size: a training could put gigabytes where its status "
        "goes, and every controller and `cvmjob status` reading it held them in memory",
        "a status or result is read no further than 1 MiB, refused from its length before its body when COS gives "
        "one; a larger one is as good as absent, and said so",
        (
            "tests/unit/providers/tencent/test_capped_get.py::test_its_body_is_not_read_past_the_limit",
            "tests/unit/providers/tencent/test_capped_get.py::test_an_object_past_the_limit_is_refused_with_its_size",
            "tests/unit/lifecycle/test_observe.py::test_a_status_that_is_not_the_nodes_is_as_good_as_absent_and_says_why",
        ),
    ),
    Defect(
        "1", "jobs whose specs named the same `checkpoints.upload_to` restored each other's checkpoints (the second "
        "run of a spec started from the first's last step and trained nothing), and the manifest was rewritten with no "
        "condition, so two writers could lose each other's entries",
        "a job's checkpoints live under `<upload_to><job id>/`, each entry names its job and an agent restores "
        "only its own job's (or, while it has none, those of the job `checkpoints.resume_from` names, resolved at "
        "plan); the manifest is committed as create-only generations, so racing writers both keep their entries",
        (
            "tests/faults/test_checkpoints.py::test_checkpoints",
            "tests/unit/agent/test_manifest_race.py::test_two_writers_racing_on_the_manifest_both_keep_their_entries",
            "tests/emulator/test_cos_forbid_overwrite.py::"
            "test_put_object_forbidden_to_overwrite_leaves_the_object_as_it_was",
            "tests/emulator/test_cos_forbid_overwrite.py::"
            "test_complete_multipart_forbidden_to_overwrite_leaves_the_object_as_it_was",
        ),
    ),
    Defect(
        "9", "two `cvmjob sweep run` of one study could both drive it: the sweeper was a study attribute read and then "
        "written, so a run paused past its beat took the study back and told trials the other one drove (Optuna's "
        "second update of a finished trial raised, uncaught)",
        "one `sweep run` per study by a compare-and-set lease with a random token in the store (`sweepers`), renewed "
        "every round and before every word to the study; a run that lost it stops, saying so",
        ("tests/unit/sweep/test_run.py::test_one_sweep_run_drives_a_study_and_one_taken_over_tells_it_nothing_more",),
    ),
    Defect(
        "4", "a checkpoint manifest that is not one (garbage or oversized, written with the keys the training holds) "
        "made the agent's uploader and `cvmjob status` raise",
        "a manifest generation that does not decode, or is past 4 MiB, is passed over for the one before it (said "
        "in the log), and the next commit goes after it, never over it",
        ("tests/unit/agent/test_manifest_garbage.py::"
         "test_garbage_or_oversized_generations_are_passed_over_and_the_next_commit_goes_after_them",
         "tests/unit/agent/test_manifest_garbage.py::test_nothing_readable_is_an_empty_manifest_not_an_error"),
    ),
    Defect(
        "6", "a fencing token was the last one plus one, so a commit that a PostgreSQL failover lost (an asynchronous "
        "replica promoted, or `synchronous_commit=off` and a crash) handed the same token to the next controller, "
        "and both passed the fence",
        "each taking of a lease draws a random 63-bit token: a lost commit never gives two holders one token, and "
        "the holder whose commit was lost is refused at its next write or lease check",
        ("tests/unit/state/test_leases.py::test_a_lease_whose_commit_was_lost_is_never_handed_out_again",),
    ),
    Defect(
        "10", "a SQLite store with a damaged page, or a file that is not SQLite, made every command print a "
        "traceback",
        "every command says in one line which file is damaged and how to get out (restore a backup, or move it "
        "aside), exit 2; the file stays byte for byte as it was (a process checks it whole before it first writes, "
        "and never writes to a file it found damaged)",
        ("tests/e2e/test_store_damaged.py::"
         "test_every_command_says_the_store_is_damaged_in_one_line_and_leaves_it_as_it_is",),
    ),
    Defect(
        "10", "a PostgreSQL outage killed every `cvmjob controller` replica at its first refused connection",
        "a replica says the outage once, tries the store again with backoff, and drives its jobs on once the server "
        "answers (the job in the test ends SUCCEEDED on its first attempt)",
        ("tests/e2e/test_store_outage.py::test_a_controller_waits_out_a_postgresql_outage_and_its_job_succeeds",),
    ),
    Defect(
        "7", "a controller paused inside a retried call (`retrying()`) went on with its next attempt, and sent "
        "TerminateInstances after another controller had taken the job over (scenario "
        "`stale-controller-inside-a-retry`); renewals failing for longer than the lease did not stop its cloud calls",
        "every action and every attempt of its cloud calls asks the job's lease guard first: it refuses once the lease "
        "is known to be another's (the store is asked after every wait), or once its last renewal is older than two "
        "thirds of the TTL on the monotonic clock and renewing it on the spot, fenced by its token, fails; the engine "
        "drops the job without acting again",
        ("tests/faults/test_fencing.py::test_fencing_on_the_emulator",
         "tests/unit/lifecycle/test_lease.py::"
         "test_a_controller_late_to_renew_renews_on_the_spot_unless_another_took_the_job",
         "tests/unit/controller/test_engine.py::test_cloud_calls_stop_once_renewals_failed_for_the_ttl_less_a_margin",
         "tests/unit/providers/tencent/test_retry.py::test_every_attempt_is_preceded_by_the_guard_and_its_refusal_stops_the_retries"),
    ),
    Defect(
        "8", "a refused refresh of the agents' STS keys (`AuthError`) escaped the engine: `cvmjob run` died, and the "
        "quiet agent was taken for a lost instance and its healthy training terminated (scenario "
        "`key-refresh-refused`)",
        "a refused refresh is one event naming `sts:GetFederationToken`, retried with backoff while the agents' keys "
        "last; the silence it causes is never read as a lost instance; once the keys expire the job fails with that "
        "reason and tears down",
        ("tests/faults/test_keys.py::test_keys_on_the_emulator",
         "tests/unit/lifecycle/test_decide.py::"
         "test_a_silent_agent_whose_keys_the_controller_owes_is_not_taken_for_a_lost_instance",
         "tests/unit/lifecycle/test_execute.py::"
         "test_a_refused_refresh_is_said_once_naming_the_permission_and_the_controller_goes_on"),
    ),
    Defect(
        "11", "a full disk while the workdir was archived left the job in STAGING and `cvmjob run` died with a "
        "traceback, the partial archive left behind",
        "an archive that cannot be written or read fails the job (FAILED_ERROR) with one reason naming the archive "
        "and the free space, the partial archive removed, nothing in the state bucket or the cloud",
        ("tests/unit/staging/test_bundle.py::test_a_full_disk_while_archiving_is_one_error_naming_the_archive_and_the_free_space",
         "tests/unit/staging/test_bundle.py::test_a_partial_archive_is_removed_when_the_file_size_limit_stops_it",
         "tests/e2e/test_staging_disk_full.py::"
         "test_a_disk_full_while_bundling_fails_the_job_with_the_reason_and_creates_nothing"),
    ),
    Defect(
        "11", "a grid sweep over 0..1e12 listed every value while validating and exhausted memory",
        "a grid's size is counted arithmetically; one of more than 100,000 combinations is refused at its largest "
        "parameter, naming the sizes",
        ("tests/unit/sweep/test_spec.py::test_a_grid_too_large_is_refused_by_counting_never_by_listing",),
    ),
    Defect(
        "11", "two `run --if-changed` runners with the same inputs both trained",
        "the first claims the inputs in the state bucket (create-only); a second follows its job and reuses its "
        "result, training only if that job did not succeed on unchanged data",
        ("tests/e2e/test_retrain.py::"
         "test_a_second_runner_with_the_same_inputs_follows_the_first_and_reuses_its_result",),
    ),
    Defect(
        "3", "`snapshot.keep_last` deleted older images by job name and `$USER@hostname`: another CVMJOB_HOME's or "
        "CI runner's images of a job of the same name too",
        "image retention retires only images of jobs this store holds",
        ("tests/unit/lifecycle/test_image_retention.py::test_retention_retires_only_images_of_jobs_this_store_holds",
         "tests/faults/test_matrix.py::test_matrix"),
    ),
    Defect(
        "11", "`$CVMJOB_HOME` and the background controllers' logs were created world-readable (0755, 0644): the store "
        "beside them holds every job's spec, the logs the trainings' output",
        "the home cvmjob creates is 0700 and each log it creates 0600; a workdir archive that cannot be made is one "
        "stated error wherever it is made (STAGING, `run --if-changed`), never a traceback",
        ("tests/unit/state/test_home.py::test_the_home_and_the_background_logs_are_their_owners_only",),
    ),
)

# Sections of prose docs/reliability.md carries after the defects: (heading, markdown text).
NOTES: tuple[tuple[str, str], ...] = (
    (
        "What the emulator protects on a shared host",
        "The emulator is a test cloud for one user, not a sandbox. Its instances are processes of the emulator's "
        "user: whoever holds its SecretKey can run any code as that user (RunInstances with a UserData), and through "
        "the admin API rewind its clock, reclaim its instances and seed its buckets. That is why the key is private "
        "to that user, and what it guarantees is that nobody else on the host gets it:\n\n"
        "- Each emulator has a random key of its own, made at its first start in `STATE_DIR/secret_key` (0600) and "
        "kept across restarts; there is no public default. An operator may give one by `--secret-key-file` (refused "
        "if others can read the file) or `TENCENTCLOUD_EMULATOR_SECRET_KEY`; never by argument, since every user "
        "reads a process's command line (`ps`), and `--secret-key` is refused with the way to do it instead.\n"
        "- The state directory is 0700: it holds the key, every STS key issued (`state.json`), the instances' disks "
        "and the COS objects.\n"
        "- The admin API takes that key and nothing else (no temporary key, no empty bearer): an instance, which "
        "holds only STS keys scoped to its job, cannot reach it.\n"
        "- `seed` reads only folders under the roots the emulator was told at start (`--seed-root`; default the "
        "directory `serve` runs in; the embedded emulator: the user's home and the directory of the command that "
        "started it), links resolved; any other folder is refused, before anything is read or created.\n"
        "- It listens on 127.0.0.1; another address needs a key given on purpose.\n\n"
        "What it does not protect: instances are not isolated from the emulator's user, so training code run on the "
        "emulator can read that user's files, the key file included (run only code you would run yourself); any "
        "local process can connect to the loopback port (it still needs the key); the key file is as safe as the "
        "user's account (root, or anyone who can become that user, reads it); and a link swapped into a seed "
        "folder between the check and the read is not caught.",
    ),
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
    (
        "What a highly available PostgreSQL store needs",
        "cvmjob's fence is a check inside the database: a job's write commits only in the transaction that finds "
        "the writer's lease token on the job's row. It is exactly as good as the database's memory of what it "
        "acknowledged. A store shared by replicas that must survive the loss of a server needs:\n\n"
        "- synchronous replication to a quorum: `synchronous_standby_names = 'ANY 1 (a, b)'` (or `FIRST n`) with "
        "`synchronous_commit = on` (the standby has the commit on disk before the client hears of it) or "
        "`remote_apply` (visible there too); never `off`, `local` or `remote_write` for cvmjob's database (on a "
        "shared server: `ALTER DATABASE cvmjob SET synchronous_commit = on`);\n"
        "- failover only to a standby that was synchronous (Patroni's `synchronous_mode` and "
        "`synchronous_mode_strict`, or your operator's equivalent), never an automatic promotion of an asynchronous "
        "replica, and the old primary fenced (stopped, or cut off from clients) before the new one takes writes;\n"
        "- `fsync` and `full_page_writes` on (the defaults).\n\n"
        "Otherwise a failover loses the commits the new primary never received. Until issue 27 a fencing token was "
        "the last one plus one, so the controller that took a lease next got the lost holder's token again and both "
        "passed the fence. Now each taking of a lease draws a random 63-bit token: the controller whose taking was "
        "lost is refused (`FencedOut`) at its next write or lease check and stops driving the job, and the new "
        "holder drives it. What no fence in the database can protect: the lost commits themselves (a transition, a "
        "node record written after RunInstances), which the next holder does again or finds again in the cloud "
        "(every action survives a crash at any point; ClientTokens and tags make a repeated launch the same "
        "launch), and a holder from before the lost commits (a controller that `resume --force` took over from "
        "while it still ran), whose token the rollback made current again until the next taking. A `cvmjob "
        "controller` replica waits out an outage or a failover (said once, tried again with backoff up to 15 s "
        "apart) and drives on when the server answers.",
    ),
)
