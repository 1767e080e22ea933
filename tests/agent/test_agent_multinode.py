"""Two nodes, two emulated instances: node 0 publishes the c10d rendezvous in COS, node 1 finds it, one torchrun
job spans both (the instances share the host's loopback, as the emulator documents), and the node that hosts
global rank 0 uploads the checkpoints and the outputs."""

from __future__ import annotations

import re

from orchestrator.contract import Outcome, Rendezvous
from tests.agent.conftest import LIGHT, AgentJob
from tests.agent.test_agent_stops import steps_in


def test_two_nodes_train_one_job_through_a_rendezvous_published_in_cos(agent_job: AgentJob) -> None:
    configs = [agent_job.config(1, command=f"python train.py --steps 20 {LIGHT}", node_rank=k, nnodes=2,
                                train={"cpu_nproc": 1, "nnodes": 2}, checkpoints={"interval_steps": 10})
               for k in (0, 1)]
    instances = [agent_job.launch(cfg) for cfg in configs]

    results = [agent_job.wait_result(instance, 1, node) for node, instance in enumerate(instances)]
    for result in results:
        assert result.outcome == Outcome.SUCCEEDED, f"{result.reason}\n{result.log_tail}"
    rendezvous = Rendezvous.model_validate(agent_job.state.get_json(agent_job.layout.rendezvous(1)))
    # Node 0's own address on this machine: its private one's loopback form (its metadata local-ipv4)
    assert re.fullmatch(r"127\.16\.\d+\.\d+", rendezvous.host) and rendezvous.instance_id == instances[0]
    logs = [agent_job.log(1, node) for node in (0, 1)]
    assert all(f"--rdzv_endpoint={rendezvous.host}:{rendezvous.port}" in log for log in logs)
    assert "--rdzv_conf=is_host=1" in logs[0] and "--rdzv_conf=is_host=0" in logs[1]
    (rank0,) = [node for node, log in enumerate(logs) if re.search(r"^world=2 ", log, re.MULTILINE)]
    assert steps_in(logs[rank0]) == list(range(20)) and results[rank0].final_step == 19
    assert results[rank0].outputs_uploaded == 2 and results[1 - rank0].outputs_uploaded == 0
    assert [c.step for c in agent_job.manifest().checkpoints] == [9, 19]
