"""The sweep's Optuna storage, opened on a new SQLite store by several processes at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from orchestrator.sweep import study as S

OPENERS = 8


def _open(db: str, ready: multiprocessing.synchronize.Barrier, errors: multiprocessing.Queue[str]) -> None:
    ready.wait()
    try:
        S.storage(db).get_all_studies()
    except Exception as exc:  # reported to the test, which names it
        errors.put(f"{type(exc).__name__}: {exc}"[:300])


def test_processes_opening_a_new_store_together_all_get_it(tmp_path: Path) -> None:
    # What a `sweep status` does while its `sweep run` starts: without one opener at a time, some of these died
    # creating Optuna's tables ("table studies already exists").
    import optuna  # noqa: F401 - imported before the fork, so the openers start together and race

    ctx = multiprocessing.get_context("fork")
    ready, errors = ctx.Barrier(OPENERS), ctx.Queue()
    openers = [ctx.Process(target=_open, args=(str(tmp_path / "state.db"), ready, errors)) for _ in range(OPENERS)]
    for p in openers:
        p.start()
    for p in openers:
        p.join(60)
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    assert not failures, failures
    assert [p.exitcode for p in openers] == [0] * OPENERS
