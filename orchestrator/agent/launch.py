"""How ``train.command`` becomes the process the agent starts, and the environment it gets.

The rule: a command that is exactly one ``python …`` / ``python3 …`` / ``python3.X …`` invocation of a script
(``python train.py --epochs 3``) or a module (``python -m pkg.train``) runs under torchrun:
``python3 -m torch.distributed.run <options> train.py --epochs 3`` (a bare ``python`` becomes ``python3``, which
every image has). Its arguments keep their shell meaning: the line is run by bash, so ``$CVMJOB_DATA_DIR``
expands. Anything else (a pipeline, ``a && b``, ``bash run.sh``, another launcher) runs as it is through bash,
once per node, with the same environment: it is then the command's job to start its workers.

torchrun options: ``--nproc_per_node`` (the GPU count for "auto", ``cpu_nproc`` on a node without GPUs),
``--max_restarts``; one node: ``--standalone``; several: ``--nnodes N`` (``MIN:N`` when elastic) and a c10d
rendezvous at node 0 (``--rdzv_endpoint host:port --rdzv_id <job>-<attempt>``, with ``is_host`` pinning the
store to node 0, because on the emulator every node shares 127.0.0.1 and would otherwise each try to host it).
Ranks come from the rendezvous, not from the node's number (torchrun ignores ``--node_rank`` with c10d).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

_PYTHON = re.compile(r"\s*(?P<python>python(?:3(?:\.[0-9]+)?)?)(?:\s+(?P<rest>.*))?", re.DOTALL)
_SHELL_OPERATORS = {";", "&", "&&", "|", "||", "(", ")", "<", ">", ">>", "<<", "|&", ";;"}


class CommandError(ValueError):
    pass


@dataclass(frozen=True)
class Rendezvous:
    host: str
    port: int
    is_host: bool  # this node hosts the c10d store (node 0)


@dataclass(frozen=True)
class Topology:
    nnodes: int
    min_nodes: int | None  # elastic lower bound; None: a fixed number of nodes
    nproc_per_node: int
    max_restarts: int
    run_id: str
    rendezvous: Rendezvous | None  # None on a single fixed node


def torchrun_options(topology: Topology) -> list[str]:
    options = [f"--nproc_per_node={topology.nproc_per_node}", f"--max_restarts={topology.max_restarts}"]
    if topology.rendezvous is None:
        return ["--standalone", "--nnodes=1", *options]
    nnodes = f"{topology.min_nodes}:{topology.nnodes}" if topology.min_nodes is not None else str(topology.nnodes)
    rdzv = topology.rendezvous
    return [
        f"--nnodes={nnodes}", *options,
        "--rdzv_backend=c10d", f"--rdzv_endpoint={rdzv.host}:{rdzv.port}", f"--rdzv_id={topology.run_id}",
        f"--rdzv_conf=is_host={1 if rdzv.is_host else 0}",
    ]


def _is_simple(command: str) -> bool:
    """One command, no shell operators outside quotes."""
    if "\n" in command.strip():
        return False
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return not any(token in _SHELL_OPERATORS for token in lexer)
    except ValueError:  # unbalanced quotes: let bash say what is wrong
        return False


def runs_under_torchrun(command: str) -> bool:
    """Whether ``shell_line`` starts the command under torchrun (the module docstring's rule)."""
    return _PYTHON.fullmatch(command) is not None and _is_simple(command)


def shell_line(command: str, topology: Topology) -> str:
    """The bash line for the command (see the module docstring for the rule)."""
    match = _PYTHON.fullmatch(command)
    if match is None or not runs_under_torchrun(command):
        return command
    rest = (match["rest"] or "").strip()
    first = shlex.split(rest)[0] if rest else ""
    if not first:
        raise CommandError(f"train.command {command!r} names no script: write e.g. `python train.py`")
    if first.startswith("-") and first != "-m":
        raise CommandError(f"train.command {command!r}: python option {first} is not supported under torchrun; "
                           "write `python train.py …` or `python -m package.module …`")
    python = "python3" if match["python"] == "python" else match["python"]
    return f"exec {python} -m torch.distributed.run {shlex.join(torchrun_options(topology))} {rest}"


def training_env(base: Mapping[str, str], contract: Mapping[str, str], user: Mapping[str, str],
                 defaults: Mapping[str, str] | None = None, secrets: Mapping[str, str] | None = None) -> dict[str, str]:
    """``defaults`` (what the agent chose, e.g. the collectives' interface: the image's environment and the job's
    override it), the agent's environment, the job's ``train.env``, its ``secrets`` (the training's alone: setup
    and preflight are not given them), then the contract (CVMJOB_*, which the spec reserves).

    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: without it torchrun's worker restarts often reuse stale peer addresses
    and hang (shared/reference/client-recipes.md §5.4). PYTHONUNBUFFERED: step lines reach the log as printed.
    """
    return {**(defaults or {}), **base, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "PYTHONUNBUFFERED": "1", **user,
            **(secrets or {}), **contract}
