"""agent/container.py: what a node pulls and what it calls the image afterwards, with a runtime that is a script
recording its calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.agent.container import Runtime, local_name, pull
from orchestrator.agent.stop import StopSignal

MIRROR = "mirror.ccs.tencentyun.com"
DIGEST = "sha256:" + "a" * 64


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    program = tmp_path / "podman"
    program.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "calls"}\n')
    program.chmod(0o755)
    return Runtime(str(program), "podman")


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


@pytest.mark.parametrize(("image", "mirror", "local"), [
    ("cvmjob-team.tencentcloudcr.com/cvmjob/train:1.0", MIRROR, "cvmjob-team.tencentcloudcr.com/cvmjob/train:1.0"),
    ("cvmjob/train:1.0", None, "cvmjob/train:1.0"),
    ("cvmjob/train:1.0", MIRROR, "cvmjob/train:1.0"),
    (f"ubuntu@{DIGEST}", MIRROR, f"{MIRROR}/library/ubuntu@{DIGEST}"),
])
def test_the_image_keeps_its_own_name_except_a_digest_through_the_mirror(image: str, mirror: str | None,
                                                                         local: str) -> None:
    assert local_name(image, mirror) == local


def test_a_docker_hub_image_is_pulled_through_the_mirror_and_tagged_with_its_docker_hub_name(
        runtime: Runtime, tmp_path: Path) -> None:
    pull(runtime, "cvmjob/train:1.0", tmp_path / "pull.log", StopSignal(), docker_hub_mirror=MIRROR)
    assert calls(tmp_path) == [f"pull {MIRROR}/cvmjob/train:1.0",
                               f"tag {MIRROR}/cvmjob/train:1.0 docker.io/cvmjob/train:1.0"]


@pytest.mark.parametrize(("image", "mirror"), [
    ("cvmjob-team.tencentcloudcr.com/cvmjob/train:1.0", MIRROR),  # not Docker Hub's
    ("cvmjob/train:1.0", None),  # a public IP: Docker Hub itself
    (f"ubuntu@{DIGEST}", MIRROR),  # a digest cannot be a tag: it keeps the mirror's name
])
def test_anything_else_is_pulled_as_it_is_named_and_not_tagged(runtime: Runtime, tmp_path: Path, image: str,
                                                               mirror: str | None) -> None:
    pull(runtime, image, tmp_path / "pull.log", StopSignal(), docker_hub_mirror=mirror)
    assert calls(tmp_path) == [f"pull {local_name(image, mirror)}"]
