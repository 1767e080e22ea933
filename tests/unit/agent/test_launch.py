from __future__ import annotations

import pytest

from orchestrator.agent.launch import (
    CommandError,
    Rendezvous,
    Topology,
    runs_under_torchrun,
    shell_line,
    training_env,
)

SINGLE = Topology(nnodes=1, min_nodes=None, nproc_per_node=2, max_restarts=0, run_id="job-1", rendezvous=None)
TORCHRUN = "python3 -m torch.distributed.run --standalone --nnodes=1 --nproc_per_node=2 --max_restarts=0"


def test_a_python_script_runs_under_torchrun_with_its_arguments_untouched() -> None:
    line = shell_line('python train.py --epochs 3 --data "$CVMJOB_DATA_DIR/x"', SINGLE)
    assert line == f'exec {TORCHRUN} train.py --epochs 3 --data "$CVMJOB_DATA_DIR/x"'
    assert runs_under_torchrun("python train.py --epochs 3")


def test_python3_and_versioned_interpreters_are_kept_and_modules_are_supported() -> None:
    assert shell_line("python3.11 -m pkg.train --x", SINGLE).startswith("exec python3.11 -m torch.distributed.run ")
    assert shell_line("python3 -m pkg.train --x", SINGLE).endswith("--max_restarts=0 -m pkg.train --x")


@pytest.mark.parametrize("command", [
    "bash run.sh", "python prep.py && python train.py", "python train.py | tee log", "deepspeed train.py",
    "FOO=1 python train.py", "python train.py; echo done", "python train.py\npython eval.py",
])
def test_anything_but_one_python_invocation_runs_as_it_is(command: str) -> None:
    assert shell_line(command, SINGLE) == command
    assert not runs_under_torchrun(command)


def test_python_options_other_than_m_are_refused_with_the_way_to_write_it() -> None:
    with pytest.raises(CommandError, match="python option -u"):
        shell_line("python -u train.py", SINGLE)
    with pytest.raises(CommandError, match="names no script"):
        shell_line("python", SINGLE)


def test_multi_node_uses_a_c10d_rendezvous_hosted_by_node_zero() -> None:
    node1 = Topology(nnodes=4, min_nodes=2, nproc_per_node=8, max_restarts=3, run_id="job-2",
                     rendezvous=Rendezvous("10.0.0.5", 29400, is_host=False))
    line = shell_line("python train.py", node1)
    assert "--nnodes=2:4 --nproc_per_node=8 --max_restarts=3 --rdzv_backend=c10d" in line
    assert "--rdzv_endpoint=10.0.0.5:29400 --rdzv_id=job-2 --rdzv_conf=is_host=0 train.py" in line
    assert "--standalone" not in line and "--node_rank" not in line
    fixed = Topology(nnodes=2, min_nodes=None, nproc_per_node=1, max_restarts=0, run_id="j-1",
                     rendezvous=Rendezvous("127.0.0.1", 1234, is_host=True))
    assert "--nnodes=2 " in shell_line("python t.py", fixed) and "is_host=1" in shell_line("python t.py", fixed)


def test_the_contract_wins_over_the_job_env_which_wins_over_the_defaults() -> None:
    env = training_env({"PATH": "/bin", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0"},
                       {"CVMJOB_JOB_ID": "j"}, {"NCCL_DEBUG": "WARN", "PYTHONUNBUFFERED": "0"})
    assert env == {"PATH": "/bin", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "PYTHONUNBUFFERED": "0",
                   "NCCL_DEBUG": "WARN", "CVMJOB_JOB_ID": "j"}


def test_secrets_join_the_training_env_and_the_contract_still_wins() -> None:
    env = training_env({"PATH": "/bin", "WANDB_API_KEY": "the agent's own"}, {"CVMJOB_JOB_ID": "j"},
                       {"NCCL_DEBUG": "WARN"}, secrets={"WANDB_API_KEY": "w"})
    assert env == {"PATH": "/bin", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "PYTHONUNBUFFERED": "1",
                   "NCCL_DEBUG": "WARN", "WANDB_API_KEY": "w", "CVMJOB_JOB_ID": "j"}
