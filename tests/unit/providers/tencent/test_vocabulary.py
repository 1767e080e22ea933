from __future__ import annotations

import json

import pytest

from orchestrator.providers.tencent.vocabulary import ChargeType, ImageState, InstanceState, stock_word


@pytest.mark.parametrize("enum", [InstanceState, ImageState])
def test_a_state_this_version_does_not_know_reads_as_unknown(enum: type[InstanceState | ImageState]) -> None:
    for wire in ("HIBERNATING", "", None):
        assert enum(wire) is enum.UNKNOWN


@pytest.mark.parametrize("enum", [ChargeType, InstanceState, ImageState])
def test_members_equal_and_print_as_their_wire_strings(enum: type[ChargeType | InstanceState | ImageState]) -> None:
    for member in enum:
        wire = member.value
        assert member == wire and hash(member) == hash(wire)
        assert enum(wire) is member
        assert str(member) == f"{member}" == wire
        assert json.dumps({"k": member}) == json.dumps({"k": wire})


def test_charge_types_are_the_wire_strings() -> None:
    assert {c.name: c.value for c in ChargeType} == {
        "ON_DEMAND": "POSTPAID_BY_HOUR", "SPOT": "SPOTPAID", "RESERVED": "PREPAID"}


def test_a_charge_type_that_is_no_member_is_refused() -> None:
    with pytest.raises(ValueError, match="CDHPAID"):
        ChargeType("CDHPAID")


@pytest.mark.parametrize("mode", ["on-demand", "spot", "reserved"])
def test_billing_mode_and_charge_type_round_trip(mode: str) -> None:
    assert ChargeType.for_billing(mode).billing == mode


def test_every_charge_type_has_a_billing_mode() -> None:
    assert {ChargeType.for_billing(c.billing) for c in ChargeType} == set(ChargeType)


def test_an_unknown_billing_mode_is_refused() -> None:
    with pytest.raises(KeyError):
        ChargeType.for_billing("postpaid")


def test_what_instance_states_mean() -> None:
    assert {s for s in InstanceState if s.never_ran} == {InstanceState.LAUNCH_FAILED}
    assert {s for s in InstanceState if s.leaving} == {InstanceState.TERMINATING, InstanceState.LAUNCH_FAILED}
    assert {s for s in InstanceState if s.isolated} == {InstanceState.SHUTDOWN}
    assert not InstanceState.UNKNOWN.down and InstanceState.UNKNOWN.usable  # neither running nor gone
    assert InstanceState.RUNNING.usable and not InstanceState.RUNNING.down
    assert not InstanceState.SHUTDOWN.usable and InstanceState.SHUTDOWN.down


def test_what_image_states_mean() -> None:
    assert {s for s in ImageState if s.ready} == {ImageState.NORMAL}
    assert {s for s in ImageState if s.failed} == {ImageState.CREATEFAILED, ImageState.IMPORTFAILED}
    assert not ImageState.UNKNOWN.ready and not ImageState.UNKNOWN.failed


def test_people_are_shown_words_not_the_wire_strings() -> None:
    words = {s: s.word for s in InstanceState}
    assert words[InstanceState.RUNNING] == "running" and words[InstanceState.SHUTDOWN] == "isolated (recycle bin)"
    assert all(word != state.value for state, word in words.items())
    assert [stock_word(s) for s in ("EnoughStock", "NormalStock", "UnderStock", "WithoutStock", "", "NewStock")] == [
        "plenty", "some", "low", "none", "-", "NewStock"]  # a category this version does not know: as the cloud says
