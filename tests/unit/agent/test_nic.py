"""The agent's defaults for the training's environment: the collectives' interface (the one that holds the node's
address) and pip's index, unless the image or the job named them."""

from __future__ import annotations

import socket

from orchestrator.agent import nic
from orchestrator.agent.launch import training_env


def test_the_interface_holding_an_address_is_named_exactly_for_nccl_and_by_name_for_gloo() -> None:
    assert nic.interface_of("127.0.0.1") == "lo"
    assert nic.interface_of("127.16.0.9") == "lo"  # all of 127.0.0.0/8 is the loopback's (an emulated instance's)
    assert nic.socket_env("127.0.0.1") == {"NCCL_SOCKET_IFNAME": "=lo", "GLOO_SOCKET_IFNAME": "lo"}
    for _, name in socket.if_nameindex():  # every interface of this host with an address: found by it
        address = nic._primary_ipv4(name)
        if address is not None:
            assert nic.interface_of(address) == name


def test_an_address_no_interface_holds_leaves_the_choice_to_the_libraries() -> None:
    assert nic.interface_of("192.0.2.7") is None  # TEST-NET-1: held by nothing here
    assert nic.socket_env("192.0.2.7") == {}


def test_the_images_environment_and_the_jobs_override_the_agents_choice() -> None:
    chosen = nic.socket_env("127.0.0.1")
    assert training_env({}, {}, {}, chosen)["NCCL_SOCKET_IFNAME"] == "=lo"
    assert training_env({"NCCL_SOCKET_IFNAME": "eth1"}, {}, {}, chosen)["NCCL_SOCKET_IFNAME"] == "eth1"
    env = training_env({}, {"CVMJOB_JOB_ID": "job-1"}, {"GLOO_SOCKET_IFNAME": "bond0"}, chosen)
    assert (env["GLOO_SOCKET_IFNAME"], env["NCCL_SOCKET_IFNAME"], env["CVMJOB_JOB_ID"]) == ("bond0", "=lo", "job-1")
