from __future__ import annotations

from typing import Any

import pytest

from orchestrator.providers.tencent import compute
from orchestrator.providers.tencent._sdk import classify
from orchestrator.providers.tencent.compute import InstanceView, LaunchRequest
from orchestrator.providers.tencent.errors import StateConflictError
from orchestrator.providers.tencent.vocabulary import ChargeType, InstanceState
from tests.unit.providers.tencent.fakes import PagedList


def request(charge: ChargeType | str, **extra: Any) -> LaunchRequest:
    return LaunchRequest(zone="ap-guangzhou-3", instance_type="S5.MEDIUM4", charge_type=charge,  # type: ignore[arg-type]
                         image_id="img-1", client_token="tok", name="n", tags={"k": "v"}, **extra)


def item(instance_id: str, state: str | None = "RUNNING") -> dict[str, Any]:
    found: dict[str, Any] = {"InstanceId": instance_id, "Tags": [{"Key": "cvmjob:job", "Value": "j"}]}
    if state is not None:
        found["InstanceState"] = state
    return found


def test_a_launch_sends_the_charge_types_wire_string() -> None:
    for charge in ChargeType:
        sent = request(charge).params()["InstanceChargeType"]
        assert sent == charge.value and type(sent) is str


def test_a_wire_string_given_becomes_its_member_and_a_misspelt_one_fails_at_once() -> None:
    assert request("SPOTPAID").charge_type is ChargeType.SPOT
    with pytest.raises(ValueError, match="SPOT_PAID"):
        request("SPOT_PAID")


def test_only_a_spot_launch_with_a_price_bids() -> None:
    assert request(ChargeType.SPOT, spot_max_price=1.5).params()["InstanceMarketOptions"]["SpotOptions"] == {
        "MaxPrice": "1.5000", "SpotInstanceType": "one-time"}
    assert "InstanceMarketOptions" not in request(ChargeType.SPOT).params()
    assert "InstanceMarketOptions" not in request(ChargeType.ON_DEMAND, spot_max_price=1.5).params()


def test_only_a_reserved_launch_is_prepaid() -> None:
    assert request(ChargeType.RESERVED, prepaid_months=3, prepaid_renew=True).params()["InstanceChargePrepaid"] == {
        "Period": 3, "RenewFlag": "NOTIFY_AND_AUTO_RENEW"}
    assert request(ChargeType.RESERVED).params()["InstanceChargePrepaid"]["Period"] == 1
    for charge in (ChargeType.ON_DEMAND, ChargeType.SPOT):
        assert "InstanceChargePrepaid" not in request(charge).params()


@pytest.mark.parametrize(("wire", "state"), [
    ("RUNNING", InstanceState.RUNNING), ("HIBERNATED", InstanceState.UNKNOWN), (None, InstanceState.UNKNOWN),
])
def test_an_instances_state_is_a_member(wire: str | None, state: InstanceState) -> None:
    assert InstanceView.from_api(item("ins-1", wire)).state is state


def test_a_view_built_with_the_wire_string_holds_the_member() -> None:
    view = InstanceView("ins-1", "LAUNCH_FAILED", "z", "t", "SPOTPAID", None, None, {})  # type: ignore[arg-type]
    assert view.state is InstanceState.LAUNCH_FAILED and view.state.never_ran


def test_a_tag_lookup_reads_every_page() -> None:
    fake = PagedList([item(f"ins-{i:08d}") for i in range(230)], "InstanceSet")
    found = compute.find_by_tags(fake, {"cvmjob:job": "j", "cvmjob:attempt": "1"})  # type: ignore[arg-type]
    assert [v.instance_id for v in found] == [f"ins-{i:08d}" for i in range(230)]
    _, action, params = fake.calls[0]
    assert action == "DescribeInstances"
    assert params["Filters"] == [{"Name": "tag:cvmjob:job", "Values": ["j"]}, {"Name": "tag:cvmjob:attempt",
                                                                              "Values": ["1"]}]
    assert fake.offsets == [0, 100, 200]


class ById:
    """DescribeInstances by InstanceIds over a set of known instances."""

    def __init__(self, known: set[str]) -> None:
        self.known = known
        self.asked: list[list[str]] = []

    def call(self, service: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        assert (service, action) == ("cvm", "DescribeInstances")
        ids = params["InstanceIds"]
        assert len(ids) <= compute.MAX_IDS
        self.asked.append(ids)
        found = [item(i) for i in ids if i in self.known][params["Offset"] : params["Offset"] + params["Limit"]]
        return {"InstanceSet": found, "TotalCount": len([i for i in ids if i in self.known])}


def test_describe_asks_at_most_a_hundred_ids_at_a_time_and_leaves_out_the_unknown() -> None:
    ids = [f"ins-{i:08d}" for i in range(250)]
    fake = ById(set(ids[::2]))
    found = compute.describe(fake, ids)  # type: ignore[arg-type]
    assert set(found) == set(ids[::2])
    assert all(found[i].instance_id == i for i in found)
    assert [len(chunk) for chunk in fake.asked] == [100, 100, 50]


class Terminating:
    """TerminateInstances as the API answers it: one id it cannot terminate fails the whole batch, with that id's
    error (NotFound, or the state it is in); otherwise every id is terminated."""

    def __init__(self, pending: set[str], launch_failed: set[str], gone: set[str]) -> None:
        self.pending, self.launch_failed, self.gone = pending, launch_failed, gone
        self.terminated: list[str] = []

    def call(self, service: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        assert (service, action) == ("cvm", "TerminateInstances")
        ids = params["InstanceIds"]
        for instance_id in ids:
            if instance_id in self.gone:
                raise classify("InvalidInstanceId.NotFound", instance_id)
            if instance_id in self.launch_failed:
                raise classify("UnsupportedOperation.InstanceStateLaunchFailed", instance_id)
            if instance_id in self.pending:
                raise classify("UnsupportedOperation.InstanceStatePending", instance_id)
        self.terminated += ids
        return {}


def test_a_batch_one_instance_fails_is_terminated_one_by_one_and_a_pending_one_is_named_for_later() -> None:
    ids = [f"ins-{i:08d}" for i in range(150)]
    fake = Terminating(pending={ids[3]}, launch_failed={ids[120]}, gone={ids[7], ids[130]})
    with pytest.raises(StateConflictError, match=ids[3]):
        compute.terminate(fake, ids)  # type: ignore[arg-type]
    assert sorted(fake.terminated) == sorted(set(ids) - {ids[3], ids[7], ids[120], ids[130]})
    fake.pending.clear()  # it has left PENDING
    compute.terminate(fake, [ids[3], ids[7], ids[120]])  # type: ignore[arg-type]
    assert fake.terminated[-1] == ids[3]


class Quotas:
    """DescribeZoneInstanceConfigInfos answering fixed rows."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def call(self, service: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        assert (service, action) == ("cvm", "DescribeZoneInstanceConfigInfos")
        return {"InstanceTypeQuotaSet": self.rows}


def test_an_offering_carries_the_types_network_bandwidth_when_the_catalog_gives_it() -> None:
    row = {"Zone": "ap-guangzhou-3", "InstanceType": "GT4.4XLARGE96", "InstanceChargeType": "POSTPAID_BY_HOUR",
           "Status": "SELL", "InstanceBandwidth": 25}
    fake = Quotas([row, {**row, "InstanceType": "S5.MEDIUM4", "InstanceBandwidth": None}])
    found = compute.offerings(fake, ["ap-guangzhou-3"], None, ChargeType.ON_DEMAND)  # type: ignore[arg-type]
    assert [(o.instance_type, o.bandwidth_gbps) for o in found] == [("GT4.4XLARGE96", 25.0), ("S5.MEDIUM4", None)]
