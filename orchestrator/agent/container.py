"""The training in the job's container (spec ``container:``): log in, pull, and run one container per node.

The runtime is the host's Docker or Podman (the image has it, or the agent installs Docker). The container gets
the host's network (the multi-node rendezvous is unchanged), its IPC (or a sized /dev/shm), every GPU, the RDMA
devices with memlock unlimited where the host has them (HCC types; Tencent's own GPU containers' flags), and the
workdir, data and progress folders at the same paths, so that every CVMJOB_* variable means inside what it means
outside. Only the variables the agent chose are passed, by name (``--env NAME``: the values stay out of the
command line): the host's PATH and the like would break the image's own.

Signals: the container's processes are not the runtime CLI's children (they hang under containerd-shim or
conmon), so the tree the agent signals is the one under the container's init process, which the runtime names.
The CLI itself is never signalled: it exits with the container's exit code once the container ends. A container
is never stopped by the runtime (``docker stop`` would SIGKILL after 10 s): the agent signals the training and
waits for its checkpoint as it does on the host, and removes the container only after.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.contract import Outcome
from orchestrator.spec.container import DOCKER_HUB, docker_hub_name

from . import host
from .errors import AttemptEnded
from .processes import Launched, ProcessTree, process_table, stop_tree
from .stop import StopSignal

log = logging.getLogger(__name__)

RUNTIMES = ("docker", "podman")  # in order of preference when a host has both
PULL_TRIES = 3
PULL_PAUSE_SECONDS = 5.0
# What a registry says when no retry can help: the image does not exist, or the login does not allow it.
_PERMANENT = ("manifest unknown", "not found", "name unknown", "unauthorized", "authentication required", "denied",
              "invalid reference", "requested access to the resource is denied")
_INSPECT_SECONDS = 0.5
_POLL_SECONDS = 0.1
_ENDED = ("exited", "stopped", "dead")  # a container's states once its processes are gone (Docker's, Podman's)


@dataclass(frozen=True)
class Runtime:
    program: str
    name: str  # docker or podman

    def command(self, *args: str) -> list[str]:
        return [self.program, *args]

    def run(self, *args: str, stdin: str | None = None,
            timeout: float | None = 120) -> subprocess.CompletedProcess[str]:
        """One CLI call to its end, its output captured; the caller reads its exit code."""
        return subprocess.run(self.command(*args), input=stdin, capture_output=True, text=True, timeout=timeout,
                              check=False)


RUNTIME_PACKAGE = "docker.io"  # Ubuntu's and Debian's Docker, on Tencent's mirror (no public IP needed)


def _found() -> Runtime | None:
    here = host.current()
    for name in RUNTIMES:
        program = here.program(name)
        if program is not None:
            return Runtime(program, name)
    return None


def ensure_runtime(log_path: Path) -> Runtime:
    """The host's container runtime; where the image has none, Docker installed from the image's package
    mirror (Tencent's, reachable without a public IP). GPUs in the container need NVIDIA's container toolkit too,
    which the mirror does not carry: an image that has it, or a setup command that installs it."""
    found = _found()
    if found is not None:
        return found
    apt = host.current().program("apt-get")
    if apt is None:
        raise AttemptEnded(Outcome.SETUP_FAILED, "the job runs in a container but this host has no container runtime "
                                                 "(docker or podman) and no apt-get to install one: boot from an "
                                                 "image that has Docker (image:)")
    log.info("no container runtime on this host: installing %s", RUNTIME_PACKAGE)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with log_path.open("ab") as out:
        for args in ([apt, "update", "-q"], [apt, "install", "-y", "-q", RUNTIME_PACKAGE]):
            code = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, env=env, check=False).returncode
            if code != 0:
                raise AttemptEnded(Outcome.SETUP_FAILED, f"installing the container runtime failed: `apt-get "
                                                         f"{' '.join(args[1:])}` exited with {code} (the node's "
                                                         "log has its output)", exit_code=code)
    found = _found()
    if found is None:
        raise AttemptEnded(Outcome.SETUP_FAILED, f"apt-get installed {RUNTIME_PACKAGE} but no docker command "
                                                 "appeared")
    return found


def _said(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (done.stderr or done.stdout or "").splitlines() if line.strip()]
    return lines[-1][-400:] if lines else f"exit code {done.returncode}"


def login(runtime: Runtime, registry: str, username: str, password: str) -> None:
    """Log in with the password on stdin (never on a command line, which any process can read)."""
    done = runtime.run("login", "--username", username, "--password-stdin", registry, stdin=password)
    if done.returncode != 0:
        raise AttemptEnded(Outcome.SETUP_FAILED, f"{registry} refused the login of {username!r} "
                                                 f"(container.login): {_said(done)}", exit_code=done.returncode)


def _names(image: str, docker_hub_mirror: str | None) -> tuple[str, str]:
    """Where the node pulls ``image`` from, and what it calls it once pulled. A Docker Hub image comes through
    ``docker_hub_mirror`` where there is one (an instance without a public IP reaches Docker Hub only through
    Tencent's mirror) and is tagged with its own name, except a digest (a tag cannot name one), which keeps the
    mirror's name; anything else comes from its own registry as it is named."""
    name = docker_hub_name(image)
    if docker_hub_mirror is None or name is None:
        return image, image
    source = f"{docker_hub_mirror}/{name}"
    return source, source if "@" in image else image


def local_name(image: str, docker_hub_mirror: str | None) -> str:
    """What the node calls ``image`` once ``pull`` has pulled it."""
    return _names(image, docker_hub_mirror)[1]


def pull(runtime: Runtime, image: str, log_path: Path, stop: StopSignal,
         docker_hub_mirror: str | None = None) -> float:
    """Pull ``image`` (retried unless the registry's answer is final), through Tencent's mirror when it is on
    Docker Hub and ``docker_hub_mirror`` is set; the seconds it took."""
    source, local = _names(image, docker_hub_mirror)
    through = "" if source == image else f" (as {source}, Tencent's Docker Hub mirror: no public IP)"
    started = time.monotonic()
    for attempt in range(1, PULL_TRIES + 1):
        done = runtime.run("pull", source, timeout=None)  # minutes for a 15 GB image
        with log_path.open("a") as out:
            out.write(done.stdout + done.stderr)
        if done.returncode == 0 and local != source:
            done = runtime.run("tag", source, f"{DOCKER_HUB}/{docker_hub_name(image)}")
        if done.returncode == 0:
            return time.monotonic() - started
        said = _said(done)
        final = any(word in said.lower() for word in _PERMANENT)
        if final or attempt == PULL_TRIES:
            tries = "" if final else f" after {attempt} tries"
            raise AttemptEnded(Outcome.SETUP_FAILED, f"pulling {image}{through} failed{tries}: {said}",
                               exit_code=done.returncode)
        log.warning("pulling %s failed (%s); trying again", image, said)
        stop.event.wait(PULL_PAUSE_SECONDS * attempt)
        stop.check()
    raise AssertionError("unreachable")


def image_size(runtime: Runtime, image: str) -> int | None:
    done = runtime.run("image", "inspect", "--format", "{{.Size}}", image)
    try:
        return int(done.stdout.strip())
    except ValueError:
        return None


@dataclass(frozen=True)
class Container:
    runtime: Runtime
    image: str
    name: str
    mounts: tuple[Path, ...]  # host folders mounted at the same path
    shm_size: str | None
    gpus: bool
    rdma: bool

    def run_args(self, env: Mapping[str, str], workdir: Path, command: Sequence[str]) -> list[str]:
        """``run`` with the variables passed by name (their values come from the CLI's environment). Never
        ``--rm``: Podman's CLI then waits up to 20 s past the end for a cleanup; the agent removes the container."""
        args = ["run", "--name", self.name, "--network", "host", "--workdir", str(workdir), "--init=false",
                "--sig-proxy=false"]
        args += ["--shm-size", self.shm_size] if self.shm_size else ["--ipc", "host"]
        if self.gpus:
            args += ["--gpus", "all"] if self.runtime.name == "docker" else ["--device", "nvidia.com/gpu=all"]
        if self.rdma:  # RDMA registers pinned memory: NCCL over InfiniBand needs memlock unlimited
            args += ["--device", "/dev/infiniband", "--ulimit", "memlock=-1:-1", "--ulimit", "stack=67108864:67108864"]
        for folder in dict.fromkeys(self.mounts):
            args += ["--volume", f"{folder}:{folder}"]
        for name in sorted(env):
            args += ["--env", name]
        return self.runtime.command(*args, "--entrypoint", "", self.image, *command)

    def make_mounts(self) -> None:
        """The folders it mounts, made now: a runtime refuses to mount one that does not exist yet (the data
        folder appears with the sync, after the preflight)."""
        for folder in self.mounts:
            folder.mkdir(parents=True, exist_ok=True)

    def remove(self) -> None:
        self.runtime.run("rm", "--force", self.name)

    def state(self) -> State:
        """What the runtime knows of the container now (one ``inspect``)."""
        done = self.runtime.run("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}} {{.State.Pid}}",
                                self.name)
        status, code, pid = [*done.stdout.strip().split(), "", "", ""][:3]
        return State(status, int(code) if status in _ENDED and code.lstrip("-").isdigit() else None,
                     int(pid) if pid.isdigit() and int(pid) > 0 and status == "running" else None)

    def output(self) -> str:
        """Its stdout and stderr as the runtime logged them (not through the CLI, which may be stopped first)."""
        done = self.runtime.run("logs", self.name)
        return done.stdout + done.stderr

    def run_to_end(self, args: Sequence[str], env: Mapping[str, str], cwd: Path,
                   timeout: float) -> subprocess.CompletedProcess[str]:
        """A short command in this container (the preflight's probe): its exit code and output once its processes
        are gone, watched as the training is (the CLI may wait long past the end); removed after."""
        with tempfile.TemporaryDirectory(prefix="cvmjob-") as folder:
            launched = ContainerLaunched(self, args, cwd, env, Path(folder, "cli.log"))
            deadline = time.monotonic() + timeout
            try:
                while (code := launched.poll()) is None:
                    if time.monotonic() > deadline:
                        launched.stop(grace=5)
                        raise subprocess.TimeoutExpired(list(args), timeout)
                    time.sleep(_POLL_SECONDS)
                return subprocess.CompletedProcess(list(args), code, self.output(), "")
            finally:
                self.remove()


@dataclass(frozen=True)
class State:
    status: str  # the runtime's word: created, running, exited, ... ("" when it does not know the container)
    exit_code: int | None  # once it has ended
    init_pid: int | None  # while it runs


class ContainerLaunched(Launched):
    """The runtime's ``run`` in the foreground (its output is the training's); the signals go to the tree under
    the container's init process, found once the container runs. The training has ended when that tree is gone:
    its exit code is then the container's, as the runtime records it, and a CLI still waiting (Podman's can wait on
    a cleanup that never comes) is stopped."""

    def __init__(self, container: Container, args: Sequence[str], cwd: Path, env: Mapping[str, str],
                 log_path: Path, record: Path | None = None) -> None:
        self.container = container
        container.remove()  # one a previous agent on this node left (the process record stopped its processes)
        super().__init__(args, cwd, env, log_path, record)
        self.cli = self.tree
        self.tree = ProcessTree({})
        self._adopted = False
        self._asked = 0.0
        self._code: int | None = None

    def _ask(self) -> State | None:
        """The container's state, at most every _INSPECT_SECONDS (each ask starts the runtime's CLI)."""
        if time.monotonic() - self._asked < _INSPECT_SECONDS:
            return None
        self._asked = time.monotonic()
        state = self.container.state()
        if not self._adopted and state.init_pid is not None:
            self.tree = ProcessTree({state.init_pid: process_table().get(state.init_pid, (0, -1, ""))[1]})
            self._adopted = True
        return state

    def poll(self) -> int | None:
        if self._code is not None:
            return self._code
        cli = super().poll()
        if cli is None and self._adopted and self.tree.alive():
            return None
        # Its processes are gone, or were never seen (a container that ends in less than a look): the runtime's
        # record says whether it has ended.
        state = self._ask() if cli is None else self.container.state()
        code = None if state is None else state.exit_code
        if code is None and cli is None:
            return None
        if cli is None:
            stop_tree(self.cli, grace=5)
            self.popen.wait()
        self._code = code if code is not None else cli
        return self._code

    def stop(self, grace: float) -> int:
        self._asked = 0.0
        self._ask()
        if not self._adopted:  # the container never ran: nothing inside to stop gracefully
            stop_tree(self.cli, grace)
        stop_tree(self.tree, grace)
        while (code := self.poll()) is None and self.popen.poll() is None:
            time.sleep(0.2)
        self.container.remove()
        return code if code is not None else self.popen.wait()
