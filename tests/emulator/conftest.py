"""Clients for the emulator built exactly as a user would build them against the real cloud, with only the
endpoint changed (shared/reference/client-recipes.md §0)."""

from __future__ import annotations

from typing import Any

import pytest
from qcloud_cos import CosConfig, CosS3Client
from tencentcloud.billing.v20180709 import billing_client
from tencentcloud.common import credential
from tencentcloud.common.profile.client_profile import ClientProfile
from tencentcloud.common.profile.http_profile import HttpProfile
from tencentcloud.cvm.v20170312 import cvm_client
from tencentcloud.sts.v20180813 import sts_client
from tencentcloud.tcr.v20190924 import tcr_client
from tencentcloud.vpc.v20170312 import vpc_client

from tests.emulator_process import EmulatorProcess

REGION = "ap-guangzhou"


def profile(emulator: EmulatorProcess) -> ClientProfile:
    return ClientProfile(httpProfile=HttpProfile(protocol="http", endpoint=emulator.endpoint), language="en-US")


def cred(emulator: EmulatorProcess) -> credential.Credential:
    return credential.Credential(emulator.secret_id, emulator.secret_key)


def make_cos(
    emulator: EmulatorProcess, secret_id: str | None = None, secret_key: str | None = None, token: str | None = None,
    region: str = REGION,
) -> CosS3Client:
    conf = CosConfig(
        Region=region,
        SecretId=secret_id or emulator.secret_id,
        SecretKey=secret_key or emulator.secret_key,
        Token=token,
        Scheme="http",
        IP="127.0.0.1",
        Port=emulator.port,
        ServiceDomain=emulator.endpoint,
    )
    return CosS3Client(conf, retry=0)


@pytest.fixture
def cvm(emulator: EmulatorProcess) -> Any:
    return cvm_client.CvmClient(cred(emulator), REGION, profile(emulator))


@pytest.fixture
def vpc(emulator: EmulatorProcess) -> Any:
    return vpc_client.VpcClient(cred(emulator), REGION, profile(emulator))


@pytest.fixture
def sts(emulator: EmulatorProcess) -> Any:
    return sts_client.StsClient(cred(emulator), REGION, profile(emulator))


@pytest.fixture
def tcr(emulator: EmulatorProcess) -> Any:
    return tcr_client.TcrClient(cred(emulator), REGION, profile(emulator))


@pytest.fixture
def billing(emulator: EmulatorProcess) -> Any:
    return billing_client.BillingClient(cred(emulator), REGION, profile(emulator))


@pytest.fixture
def cos(emulator: EmulatorProcess) -> CosS3Client:
    return make_cos(emulator)


@pytest.fixture
def bucket(emulator: EmulatorProcess, cos: CosS3Client) -> str:
    name = f"cvmjob-test-{emulator.appid}"
    cos.create_bucket(Bucket=name)
    return name
