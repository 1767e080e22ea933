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
_DOCKER_HUB_HOSTS = (DOCKER_HUB, "index.docker.io", "registry-1.docker.io")
TCR_SUFFIX = ".tencentcloudcr.com"  # an enterprise instance's domain: <instance name>.tencentcloudcr.com
_SIZE = re.compile(r"[1-9][0-9]*[kmg]")


def image_host(image: str) -> str:
    """The registry an image reference names (Docker Hub when it names none)."""
    match = _IMAGE.fullmatch(image)
    return (match["host"] if match and match["host"] else DOCKER_HUB)


def docker_hub_name(image: str) -> str | None:
    """The image's name on Docker Hub, with its tag or digest and Docker's ``library/`` for official images
    (``ubuntu:22.04`` is ``library/ubuntu:22.04``), as a registry mirror of Docker Hub serves it; None for an image
    of another registry."""
    match = _IMAGE.fullmatch(image)
    if match is None or (match["host"] is not None and match["host"] not in _DOCKER_HUB_HOSTS):
        return None
    path = match["path"] if "/" in match["path"] else f"library/{match['path']}"
    return path + (f":{match['tag']}" if match["tag"] else "") + (f"@{match['digest']}" if match["digest"] else "")


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
    """How the nodes log in to the image's registry: a Tencent Container Registry enterprise instance (``tcr``:
    the controller issues a temporary token for it and rotates it with the agents' keys), or the names of two of
    the job's ``secrets`` whose values are the username and password (TCR's personal edition: the account id and
    the password set in the console; any other registry: its login)."""

    tcr: Annotated[str, Field(pattern=r"^tcr-[a-z0-9]{8}$", examples=["tcr-a1b2c3d4"])] | None = None
    """The enterprise instance's id; the image names its domain, <instance name>.tencentcloudcr.com."""
    username_secret: EnvName | None = Field(None, examples=["REGISTRY_USERNAME"])
    """The secret holding the username."""
    password_secret: EnvName | None = Field(None, examples=["REGISTRY_PASSWORD"])
    """The secret holding the password or token."""

    @model_validator(mode="after")
    def _one_way(self) -> RegistryLogin:
        secrets = (self.username_secret, self.password_secret)
        if self.tcr is not None and any(secrets):
            raise field_problem("tcr", "is a login of its own: drop username_secret and password_secret, or tcr")
        if self.tcr is None and None in secrets:
            missing = "password_secret" if self.password_secret is None else "username_secret"
            raise field_problem(missing, "is missing: a login is tcr: <instance id>, or both username_secret and "
                                         "password_secret")
        if self.tcr is None and self.username_secret == self.password_secret:
            raise field_problem("password_secret", "names the same secret as username_secret")
        return self

    @property
    def secrets(self) -> tuple[str, ...]:
        """The job's secrets this login holds (the agent's alone, never the training's)."""
        return tuple(name for name in (self.username_secret, self.password_secret) if name is not None)


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

    @property
    def tcr(self) -> str | None:
        """The enterprise instance the nodes log in to with the controller's token (login.tcr)."""
        return self.login.tcr if self.login is not None else None

    @model_validator(mode="after")
    def _tcr_domain(self) -> ContainerSpec:
        if self.login is not None and self.login.tcr is not None and not image_host(self.image).endswith(TCR_SUFFIX):
            raise field_problem("login.tcr", f"logs in to an enterprise instance, but the image is on "
                                             f"{image_host(self.image)}: name it <instance name>{TCR_SUFFIX}/...")
        return self
