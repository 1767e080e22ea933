"""``container:`` in the spec: a tagged image reference (never ``latest``), a login to a TCR enterprise instance or
through two of the job's secrets; a bad one is one line at its field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.spec import SpecError, load_spec
from orchestrator.spec.container import docker_hub_name, image_host
from tests.unit.spec.conftest import MINIMAL_SPEC

LOGIN = "  login: {username_secret: REGISTRY_USERNAME, password_secret: REGISTRY_PASSWORD}\n"
SECRETS = "secrets: [REGISTRY_USERNAME, REGISTRY_PASSWORD]\n"


def test_an_image_and_its_login_load(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(MINIMAL_SPEC + SECRETS + "container:\n  image: ccr.ccs.tencentyun.com/t/x:1.0\n"
                                + LOGIN + "  shm_size: 16g\n"))
    assert spec.container is not None and spec.container.image == "ccr.ccs.tencentyun.com/t/x:1.0"
    assert spec.container.login is not None and spec.container.login.password_secret == "REGISTRY_PASSWORD"
    assert load_spec(write_spec(MINIMAL_SPEC)).container is None


def test_a_tcr_login_needs_no_secret(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(MINIMAL_SPEC + "container:\n  image: team.tencentcloudcr.com/t/x:1.0\n"
                                "  login: {tcr: tcr-a1b2c3d4}\n"))
    assert spec.container is not None and spec.container.tcr == "tcr-a1b2c3d4"
    assert spec.container.login is not None and spec.container.login.secrets == ()


@pytest.mark.parametrize(("container", "said"), [
    ("  image: Team/Train:1.0\n", "container.image: 'Team/Train:1.0' is not an image reference"),
    ("  image: ccr.ccs.tencentyun.com/t/x\n", "names no tag: add one"),
    ("  image: ccr.ccs.tencentyun.com/t/x:latest\n", "'latest' moves between attempts"),
    ("  image: ccr.ccs.tencentyun.com/t/x:1\n  shm_size: lots\n", "container.shm_size"),
    ("  image: ccr.ccs.tencentyun.com/t/x:1\n  login: {username_secret: USER, password_secret: REGISTRY_PASSWORD}\n",
     "container.login.username_secret: USER is not one of the job's secrets. add it to secrets"),
    ("  image: ccr.ccs.tencentyun.com/t/x:1\n  login: {username_secret: REGISTRY_PASSWORD, "
     "password_secret: REGISTRY_PASSWORD}\n", "container.login.password_secret: names the same secret"),
    ("  image: ccr.ccs.tencentyun.com/t/x:1\n  registry: tcr-123\n", "container.registry"),
    ("  image: team.tencentcloudcr.com/t/x:1\n  login: {tcr: tcr-1}\n", "container.login.tcr"),
    ("  image: ccr.ccs.tencentyun.com/t/x:1\n  login: {tcr: tcr-a1b2c3d4}\n",
     "container.login.tcr: logs in to an enterprise instance, but the image is on ccr.ccs.tencentyun.com"),
    ("  image: team.tencentcloudcr.com/t/x:1\n  login: {tcr: tcr-a1b2c3d4, username_secret: REGISTRY_USERNAME}\n",
     "container.login.tcr: is a login of its own"),
    ("  image: ccr.ccs.tencentyun.com/t/x:1\n  login: {username_secret: REGISTRY_USERNAME}\n",
     "container.login.password_secret: is missing"),
])
def test_a_bad_container_is_one_line_at_its_field(write_spec: Callable[[str], Path], container: str,
                                                   said: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(MINIMAL_SPEC + SECRETS + "container:\n" + container))
    [problem] = caught.value.problems
    assert said in str(problem) and "\n" not in str(problem), str(problem)


@pytest.mark.parametrize(("image", "host"), [
    ("ccr.ccs.tencentyun.com/t/x:1", "ccr.ccs.tencentyun.com"),
    ("localhost:5000/x:1", "localhost:5000"),
    ("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "docker.io"),
])
def test_the_registry_of_an_image_is_its_first_component_when_it_names_a_host(image: str, host: str) -> None:
    assert image_host(image) == host


@pytest.mark.parametrize(("image", "name"), [
    ("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"),
    ("ubuntu:22.04", "library/ubuntu:22.04"),  # an official image, as a mirror names it
    ("docker.io/team/train:1.0", "team/train:1.0"),
    ("registry-1.docker.io/library/python:3.12", "library/python:3.12"),
    ("team/train@sha256:" + "a" * 64, "team/train@sha256:" + "a" * 64),
    ("ccr.ccs.tencentyun.com/team/train:1.0", None),
    ("localhost:5000/train:1", None),
])
def test_the_docker_hub_name_of_an_image_is_what_a_mirror_of_docker_hub_serves(image: str, name: str | None) -> None:
    assert docker_hub_name(image) == name
