"""``$CVMJOB_HOME/config.yaml``: a user's defaults for every job and sweep they submit (today: ``notify``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from orchestrator.spec.base import SpecModel
from orchestrator.spec.loader import load_file
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


Spec = TypeVar("Spec", bound=SpecModel)


def with_user_defaults(spec: Spec, config: UserConfig) -> Spec:
    """``spec`` (a job's or a sweep's) with what it leaves unset taken from ``config``: its ``notify`` (a spec's
    ``notify: []`` stays none)."""
    if getattr(spec, "notify", ()) is not None:
        return spec
    return spec.model_copy(update={"notify": config.notify})


def unset_urls(targets: tuple[NotifyTarget, ...] | None, environ: Mapping[str, str]) -> list[str]:
    """A problem for each url_env of ``targets`` that ``environ`` does not set (or sets empty)."""
    return [f"notify: ${t.url_env} is not set (or empty) in this environment, and the controller reads the "
            f"receiver's URL from it: export {t.url_env}=<the webhook's URL>, in every controller's environment "
            "that may drive the job" for t in targets or () if t.url_env is not None and not environ.get(t.url_env)]
