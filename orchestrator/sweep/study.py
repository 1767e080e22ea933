"""The Optuna side of a sweep: its storage (the store's own database), samplers, pruners and distributions.

Optuna is imported here only: the controller and `cvmjob run` never pay for it."""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..extras import need
from .spec import Param, Pruner, Sampler, SweepSpec

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution

_PG_LOCK_KEY = 0x6376_6D6A_6F70  # "cvmjop": any constant the openers of one database agree on
# Study attributes cvmjob keeps (Optuna's study user attributes, so optuna-dashboard shows them too).
SPEC_ATTR = "cvmjob:spec"  # the sweep spec, as JSON: what `sweep status` and `report` read
STATE_ATTR = "cvmjob:state"  # running, finished, stopped, cancelled
REASON_ATTR = "cvmjob:stopped_reason"
CANCEL_ATTR = "cvmjob:cancel"  # set by `sweep cancel`
# Trial user attributes.
JOB_ATTR = "cvmjob:job_id"  # the trial's current job
JOBS_ATTR = "cvmjob:jobs"  # every job of the trial, oldest first (a retry adds one)
KIND_ATTR = "cvmjob:failure"  # training / infrastructure / budget / cancelled / pruned
REASON_TRIAL_ATTR = "cvmjob:reason"


def storage_url(store: str) -> str:
    """Optuna's RDB URL for the cvmjob store at ``store`` (a SQLite path, a sqlite:// or postgresql:// URL): the
    same database, so `optuna-dashboard <this URL>` shows the sweeps."""
    if store.startswith("postgresql://"):
        return "postgresql+psycopg://" + store[len("postgresql://"):]
    if "://" in store:
        return store
    return f"sqlite:///{Path(store).resolve()}"


def storage(store: str) -> optuna.storages.RDBStorage:
    need("sweep", "optuna")  # every sweep command opens its storage first
    import optuna

    optuna.logging.set_verbosity(logging.WARNING)
    url = storage_url(store)
    # Optuna creates its tables, its version row and its Alembic stamp unlocked: a `sweep status` opening a new
    # store while the `sweep run` does failed on a duplicate (PostgreSQL: an enum type; SQLite: "table studies
    # already exists", and the sweep run died). One opener at a time, like the store's own migrations.
    with _one_opener(url):
        if url.startswith("postgresql"):
            need("postgres", "psycopg")
            return optuna.storages.RDBStorage(url)
        # Sweep runs and the controller's engine share the SQLite file: wait for its write lock, as the store does.
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}})


@contextmanager
def _one_opener(url: str) -> Iterator[None]:
    """Held while Optuna opens ``url``: PostgreSQL's advisory lock, or for a SQLite file an flock on a file beside
    it (SQLite's own locks cannot serve: Optuna's connections would wait on the one holding it)."""
    import sqlalchemy

    if not url.startswith("postgresql"):
        database = sqlalchemy.engine.make_url(url).database
        if not database or database == ":memory:":
            yield
            return
        with open(f"{database}-optuna.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            yield
        return
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": _PG_LOCK_KEY})
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_LOCK_KEY})
    finally:
        engine.dispose()


def distribution(param: Param) -> BaseDistribution:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    kind = param.kind
    if kind == "categorical":
        return CategoricalDistribution(list(param.choices or []))
    assert param.low is not None and param.high is not None
    if kind == "int":
        return IntDistribution(int(param.low), int(param.high), log=param.log, step=int(param.step or 1))
    return FloatDistribution(param.low, param.high, log=param.log, step=param.step)


def distributions(spec: SweepSpec) -> dict[str, BaseDistribution]:
    return {name: distribution(param) for name, param in spec.space.items()}


def sampler(spec: SweepSpec) -> optuna.samplers.BaseSampler:
    import optuna.samplers as s

    cfg: Sampler = spec.sampler

    def startup(default: int) -> int:  # Optuna's defaults, where the spec leaves it out
        return default if cfg.startup_trials is None else cfg.startup_trials

    if cfg.type == "tpe":
        return s.TPESampler(seed=cfg.seed, multivariate=True, n_startup_trials=startup(10))
    if cfg.type == "random":
        return s.RandomSampler(seed=cfg.seed)
    if cfg.type == "grid":
        grid = {name: param.grid() or [] for name, param in spec.space.items()}
        return s.GridSampler(grid, seed=cfg.seed)
    if cfg.type == "cmaes":
        need("sweep", "cmaes")
        return s.CmaEsSampler(seed=cfg.seed, n_startup_trials=startup(1))
    if cfg.type == "gp":
        need("sweep", "scipy")
        need("train", "torch")
        return s.GPSampler(seed=cfg.seed, n_startup_trials=startup(10))
    need("sweep", "scipy")
    return s.QMCSampler(seed=cfg.seed)


def pruner(cfg: Pruner) -> optuna.pruners.BasePruner:
    import optuna.pruners as p

    if cfg.type == "median":
        return p.MedianPruner(n_startup_trials=cfg.startup_trials, n_warmup_steps=cfg.warmup_steps)
    if cfg.type == "percentile":
        return p.PercentilePruner(cfg.percentile, n_startup_trials=cfg.startup_trials,
                                  n_warmup_steps=cfg.warmup_steps)
    if cfg.type in ("asha", "successive-halving"):
        return p.SuccessiveHalvingPruner(min_resource=cfg.min_resource or "auto",
                                         reduction_factor=cfg.reduction_factor)
    if cfg.type == "hyperband":
        return p.HyperbandPruner(min_resource=cfg.min_resource or 1, max_resource=cfg.max_resource or "auto",
                                 reduction_factor=cfg.reduction_factor)
    return p.NopPruner()


def open_study(spec: SweepSpec, store: str) -> optuna.Study:
    """The sweep's study, created on its first run and continued by the next (the same name)."""
    import optuna

    return optuna.create_study(
        study_name=spec.study,
        storage=storage(store),
        directions=[o.direction for o in spec.objectives],
        sampler=sampler(spec),
        pruner=pruner(spec.pruner),
        load_if_exists=True,
    )


def load_study(name: str, store: str) -> optuna.Study:
    """An existing study, for status, cancel and report; KeyError when the store has none of that name."""
    import optuna

    return optuna.load_study(study_name=name, storage=storage(store))


def study_names(store: str) -> list[str]:
    import optuna

    return [s.study_name for s in optuna.get_all_study_summaries(storage(store), include_best_trial=False)]
