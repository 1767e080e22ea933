"""``container:``: the training runs in the user's image, pulled from a registry on every node."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from orchestrator.spec.base import SpecModel, field_problem
from orchestrator.spec.workload import EnvName

# distribution/reference: [host[:port]/]path[:tag][@digest], path components lower-case.
_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"(?:(?P<host>[a-zA-Z0-9.-]+\.[a-zA-Z0-9-]+(?::[0-9]+)?|localhost(?::[0-9]+)?)/)?"
    rf"(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}))?"
    rf"(?:@(?P<digest>sha256:[a-f0-9]{{64}}))?"
)
DOCKER_HUB = "docker.io"
_SIZE = re.compile(r"[1-9][0-9]*[kmg]")


def image_host(image: str) -> str:
    """The registry an image reference names (Docker Hub when it names none)."""
    match = _IMAGE.fullmatch(image)
    return (match["host"] if match and match["host"] else DOCKER_HUB)


def _image(value: str) -> str:
    match = _IMAGE.fullmatch(value)
    if match is None:
        raise ValueError(f"{value!r} is not an image reference: write <registry>/<repository>:<tag>, e.g. "
                         "ccr.ccs.tencentyun.com/team/train:1.0 (lower-case repository)")
    if match["tag"] is None and match["digest"] is None:
        raise ValueError(f"{value!r} names no tag: add one (e.g. :1.0), so that every node and every attempt "
                         "trains in the same image")
    if match["tag"] == "latest" and match["digest"] is None:
        raise ValueError(f"{value!r}: 'latest' moves between attempts; name a version tag or a digest")
    return value


ImageRef = Annotated[str, AfterValidator(_image)]


class RegistryLogin(SpecModel):
    """How the nodes log in to the image's registry: the names of two of the job's ``secrets``, whose values
    are the username and password (Tencent Container Registry's personal edition: the account id and the
    password set in the console)."""

    username_secret: EnvName = Field(examples=["REGISTRY_USERNAME"])
    """The secret holding the username."""
    password_secret: EnvName = Field(examples=["REGISTRY_PASSWORD"])
    """The secret holding the password or token."""


class ContainerSpec(SpecModel):
    """The training runs in this image, one container per node: host network, every GPU, the host's IPC, and
    the data, checkpoint and output folders mounted at the same paths (every CVMJOB_* variable stays valid).
    The setup commands run on the host; the preflight and the training in the container."""

    image: ImageRef = Field(examples=["ccr.ccs.tencentyun.com/team/train:1.0"])
    """The image: <registry>/<repository>:<tag> (or @sha256:...)."""
    login: RegistryLogin | None = None
    """The registry's login. Unset: the image is pulled without one (a public image)."""
    shm_size: Annotated[str, Field(pattern=_SIZE.pattern, examples=["16g"])] | None = None
    """The container's own /dev/shm of this size (k, m or g). Unset: the host's IPC namespace (``--ipc host``),
    which NCCL's shared-memory transport wants."""

    @model_validator(mode="after")
    def _login_apart(self) -> ContainerSpec:
        if self.login is not None and self.login.username_secret == self.login.password_secret:
            raise field_problem("login.password_secret", "names the same secret as username_secret")
        return self
