"""``$CVMJOB_HOME/config.yaml``: a user's defaults for every job and sweep they submit (today: ``notify``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from orchestrator.spec.base import SpecModel
from orchestrator.spec.loader import load_file
from orchestrator.spec.models import JobSpec
from orchestrator.spec.notify import NotifyTarget

CONFIG_FILE = "config.yaml"


class UserConfig(SpecModel):
    """What config.yaml may say."""

    notify: tuple[NotifyTarget, ...] = ()
    """Where jobs and sweeps whose spec has no ``notify`` post their events (the same shape as the spec's)."""


def load_user_config(home: Path) -> UserConfig:
    """The config file in ``home``, or the defaults when there is none; SpecError for one that is wrong."""
    path = home / CONFIG_FILE
    return load_file(path, UserConfig, "cvmjob config") if path.is_file() else UserConfig()


def with_user_defaults(spec: JobSpec, config: UserConfig) -> JobSpec:
    """``spec`` with what it leaves unset taken from ``config``: its ``notify`` (a spec's ``notify: []`` stays none)."""
    return spec if spec.notify is not None else spec.model_copy(update={"notify": config.notify})


def unset_urls(targets: tuple[NotifyTarget, ...] | None, environ: Mapping[str, str]) -> list[str]:
    """The url_env names of ``targets`` that ``environ`` does not set (or sets empty)."""
    return [t.url_env for t in targets or () if t.url_env is not None and not environ.get(t.url_env)]
