"""One attempt on one node, start to finish: the phases, the background threads, and the result.

Phases: setup (workdir archive, setup commands) -> preflight -> data sync -> restore (upload checkpoints a
previous run of this agent left behind, then fetch the manifest's latest of this job, or, while it has none, of
the job checkpoints.resume_from names) -> training (torchrun, supervised) ->
uploading (checkpoints, outputs). Any phase can end the attempt (AttemptEnded) with its outcome; a cancel or a
spot notice ends it between phases, or gracefully during training. Meanwhile four threads run: the heartbeat,
the log shipper, the control watcher and the spot watcher.

The end is always the same, in this order: final status, the last log chunk, result.json. A restarted agent
that finds result.json (here or in COS) only finishes its upload and exits. On node 0 of a job that snapshots
its instance, a successful attempt cleans the disk for the image (seal.py) before result.json, which then says
what the image holds: the controller creates the image only after reading it.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from orchestrator.contract import CHECKPOINT_SIGNAL, AgentConfig, JobLayout, Outcome, Phase, Result, TrainingEnv
from orchestrator.providers.tencent.errors import CloudError
from orchestrator.spec.container import ContainerSpec, image_host
from orchestrator.spec.models import JobSpec

from . import container, gpus, nic, nvme, rendezvous
from .cloud import Stores, registry_token
from .container import Container, ContainerLaunched
from .control import ControlWatcher
from .driver import wait_for_driver
from .errors import AgentTerminated, AttemptEnded
from .heartbeat import Heartbeat
from .launch import CommandError, Topology, shell_line, training_env
from .logship import LogShipper
from .manifest import read_manifest
from .metadata import Metadata
from .outputs import upload_outputs
from .paths import NodePaths
from .periodic import Periodic
from .preflight import run_on_host, run_preflight
from .processes import Launched, kill_recorded
from .restore import restorable, restore_latest
from .result import log_tail, publish, upload_saved
from .retry import retrying
from .seal import seal_for_image
from .secrets import read_secrets
from .spot import SpotWatcher
from .status import StatusBoard
from .stop import StopSignal
from .supervisor import UPLOAD_MARGIN_SECONDS, Supervisor, TrainingEnd, worker_exit_code
from .sync import DataEntry, sync_data
from .uploader import CheckpointUploader
from .workdir import prepare_workdir, run_setup

log = logging.getLogger(__name__)

PYTHON = "python3"  # the training's interpreter, as the launcher line names it (launch.shell_line)
LOG_SHIP_POLL_SECONDS = 0.5
# How soon a cancel (control.json) reaches the agent: a pruned sweep trial's instance is to be gone within seconds.
# One small GET (mostly a 404) every 2 s per node is noise beside the GPU's bill.
CONTROL_POLL_SECONDS = 2.0
# A checkpoint committed locally but not yet uploaded dies with an instance reclaimed without notice: the work
# lost is then up to one interval plus this window. A look is a local directory listing; 1 s made it the bulk of
# the window (one in five no-notice reclaims of benchmarks/recovery.py lost more than one interval).
CHECKPOINT_POLL_SECONDS = 0.2
AFTER_TRAINING_UPLOAD_SECONDS = 600.0  # for checkpoints still to upload when the training has ended
_TERMINAL_PHASE = {Outcome.SUCCEEDED: Phase.DONE, Outcome.PREEMPTED: Phase.PREEMPTED,
                   Outcome.CANCELLED: Phase.CANCELLED}


@dataclass(frozen=True)
class Folders:
    data: Path
    checkpoints: Path
    outputs: Path


class Attempt:
    def __init__(self, cfg: AgentConfig, paths: NodePaths, stores: Stores, metadata: Metadata,
                 instance_id: str) -> None:
        self.cfg = cfg
        self.paths = paths
        self.stores = stores
        self.metadata = metadata
        self.instance_id = instance_id
        self.spec = JobSpec.model_validate(cfg.spec)
        self.layout = JobLayout(cfg.job_id, cfg.state.prefix)
        self.state = stores.bucket(cfg.state.bucket)
        self.board = StatusBoard(cfg.attempt, cfg.node_rank, instance_id)
        self.stop = StopSignal()
        self.outputs_uploaded = 0
        self.synced: tuple[int, float | None] = (0, None)  # bytes downloaded, seconds: the result's sync_*
        self._training: Launched | None = None
        self._collectives: dict[str, str] | None = None  # NCCL/Gloo's interface, once found (_socket_env)
        self._secrets: dict[str, str] = {}  # spec.secrets' values, for the training's environment only
        self._container: Container | None = None  # the job's container, once its image is pulled

    # -- the whole run -------------------------------------------------------------------------------------
    def run(self) -> int:
        """0 once result.json is written (whatever the outcome); 143 after SIGTERM (no result: resume later)."""
        result_key = self.layout.result(self.cfg.attempt, self.cfg.node_rank)
        if self.paths.result.exists():
            log.info("this attempt already ended here; making sure result.json is in COS")
            upload_saved(self.paths.result, self.state, result_key)
            return 0
        if retrying("look for result.json", lambda: self.state.head(result_key)) is not None:
            log.info("result.json for attempt %d node %d exists: nothing to do", self.cfg.attempt, self.cfg.node_rank)
            return 0
        heartbeat = Periodic("heartbeat", self.cfg.heartbeat_seconds,
                             Heartbeat(self.board, self.state, self.layout.status(self.cfg.attempt, self.cfg.node_rank),
                                       gpus.gpu_stats, self.cfg.signal_key).tick, wake=self.board.changed)
        shipper = LogShipper(self.paths.run_log, self.paths.logship_state, self.state,
                             lambda seq: self.layout.log_chunk(self.cfg.attempt, self.cfg.node_rank, seq))
        logs = Periodic("logs", LOG_SHIP_POLL_SECONDS, shipper.tick)
        final_logs = Periodic("logs", 0, lambda: shipper.tick(final=True))  # run once, by hand, at the end
        watchers = [
            Periodic("control", min(self.cfg.heartbeat_seconds, CONTROL_POLL_SECONDS),
                     ControlWatcher(self.state, self.layout.control(self.cfg.attempt), self.stop).tick),
            Periodic("spot", self.cfg.preemption_poll_seconds,
                     SpotWatcher(self.metadata, self.stop, self.board).tick),
        ]
        for thread in (heartbeat, logs, *watchers):
            thread.start()
        log.info("agent: job %s attempt %d node %d/%d on %s", self.cfg.job_id, self.cfg.attempt,
                 self.cfg.node_rank, self.cfg.nnodes, self.instance_id)
        try:
            result = self._result(self._phases_or_end())
        except AgentTerminated:
            log.warning("SIGTERM: stopping the training; the agent resumes this attempt when it starts again")
            if self._training is not None:
                # Quickly: a shutdown SIGKILLs soon (the emulator after 3 s); anything left over is found by
                # the next agent through the training's process record.
                self._training.stop(grace=2)
            for thread in (*watchers, heartbeat, logs):
                thread.stop()
            final_logs.run_once()
            return 143
        for thread in watchers:
            thread.stop()
        self.board.set_phase(_TERMINAL_PHASE.get(result.outcome, Phase.FAILED), result.reason[:500])
        heartbeat.stop()
        heartbeat.run_once()
        log.info("result: %s (exit code %s): %s", result.outcome.value, result.exit_code, result.reason)
        logs.stop()
        result = result.model_copy(update={"log_tail": log_tail(self.paths.run_log)})
        for _ in range(3):
            if final_logs.run_once():
                break
        if result.outcome == Outcome.SUCCEEDED and self.cfg.node_rank == 0 and self.spec.snapshot.enabled:
            # No local copy from here on: it would be in the image. An agent that dies before the upload leaves
            # a silent node, which the controller treats as lost and retries from the last checkpoint.
            result = result.model_copy(update={"image": seal_for_image(self.cfg, self.spec)})
            publish(result, None, self.state, result_key)
        else:
            publish(result, self.paths.result, self.state, result_key)
        return 0

    def _phases_or_end(self) -> TrainingEnd:
        try:
            return self._phases()
        except AttemptEnded as ended:
            log.error("%s: %s", ended.outcome.value, ended.reason)
            return TrainingEnd(ended.outcome, ended.exit_code, ended.reason)
        except Exception as exc:
            log.exception("agent error")
            lines = traceback.format_exception(exc)
            return TrainingEnd(Outcome.AGENT_ERROR, None, "".join(lines[-6:]).strip()[-2000:])

    def _result(self, end: TrainingEnd) -> Result:
        # The metrics of every outcome: a preempted sweep trial's last values count too.
        reported = self.board.current
        return Result(attempt=self.cfg.attempt, node_rank=self.cfg.node_rank, instance_id=self.instance_id,
                      outcome=end.outcome, exit_code=end.exit_code, reason=end.reason, final_step=reported.step,
                      metrics=reported.metrics, metrics_step=reported.metrics_step,
                      outputs_uploaded=self.outputs_uploaded, sync_bytes=self.synced[0],
                      sync_seconds=self.synced[1], time=time.time())

    # -- the phases ----------------------------------------------------------------------------------------
    def _phases(self) -> TrainingEnd:
        spec = self.spec
        if self.paths.training_pid.exists():
            if kill_recorded(self.paths.training_pid.read_text()):
                log.warning("stopped the training a previous run of this agent left running")
            self.paths.training_pid.unlink()

        self.board.set_phase(Phase.SETUP)
        # First: a job whose secrets cannot be read fails before its setup and data sync are paid for.
        self._secrets = read_secrets(self.state, self.cfg.secrets_key, spec.secrets)
        for other in nvme.remove_other_jobs_data(self.cfg.job_id):
            log.info("removed data job %s left on this instance", other)
        folders = Folders(nvme.data_root(self.cfg.job_id), self.paths.inside_workdir(spec.checkpoints.dir),
                          self.paths.inside_workdir(spec.outputs.dir))
        prepare_workdir(self.paths, self.state, self.cfg.workdir_archive_key)
        if self.cfg.gpu_driver is not None:
            wait_for_driver(self.cfg.gpu_driver, float(spec.limits.bootstrap_timeout), self.board, self.stop)
        run_setup(spec.setup, self.paths.workdir, self._env(spec, folders, ""), self.paths.run_log, self.stop,
                  mirror=self.cfg.pip_index)
        self.stop.check()

        python, run = [PYTHON], run_on_host
        if spec.container is not None:
            self.board.set_phase(Phase.PULLING, f"pulling {spec.container.image}")
            self._container = self._pull(spec.container, folders)
            self._container.make_mounts()
            self.stop.check()
            env = self._env(spec, folders, "")
            probing = replace(self._container, name=f"{self._container.name}-preflight")
            python, run = probing.run_args(self._passed(env), self.paths.workdir, [PYTHON]), \
                probing.run_to_end

        self.board.set_phase(Phase.PREFLIGHT)
        run_preflight(python, self._env(spec, folders, ""), self.paths.workdir, [folders.data, folders.checkpoints],
                      spec.train, self.cfg.nnodes, run)
        self.stop.check()

        self.board.set_phase(Phase.SYNCING)
        entries = [DataEntry(d.source.bucket, d.source.prefix, d.target) for d in spec.data]
        started = time.monotonic()
        synced = sync_data(entries, folders.data, self.stores, self.board, self.stop)
        self.synced = (synced.bytes_downloaded, time.monotonic() - started)

        self.board.set_phase(Phase.RESTORING)
        uploader = CheckpointUploader(folders.checkpoints, self.stores.bucket(self.cfg.checkpoints.bucket),
                                      self.cfg.checkpoints.prefix, spec.checkpoints.keep_last, self.cfg.attempt,
                                      self.board, job_id=self.cfg.job_id)
        resume = self._restore(uploader)
        self.stop.check()

        self.board.set_phase(Phase.TRAINING)
        end = self._train(spec, folders, uploader, resume)
        return self._after_training(end, uploader, folders)

    def _restore(self, uploader: CheckpointUploader) -> Path | None:
        source = self.cfg.resume_from
        try:
            uploader.read_manifest()
            # Checkpoints a previous run of this agent wrote but did not upload are newer than the manifest's.
            uploader.drain(time.monotonic() + AFTER_TRAINING_UPLOAD_SECONDS)
            manifest = restorable(uploader.read_manifest(), self.cfg.job_id, uploader.prefix)
            store, prefix, own = uploader.store, uploader.prefix, True
            if manifest.latest() is None and source is not None:  # the job's own progress always wins
                store, prefix, own = self.stores.bucket(source.checkpoints.bucket), source.checkpoints.prefix, False
                theirs = retrying(f"read the checkpoint manifest of {source.job_id}",
                                  lambda: read_manifest(store, prefix)).manifest
                manifest = restorable(theirs, source.job_id, prefix)
                log.info("no checkpoint of this job yet: starting from %s's latest (checkpoints.resume_from)",
                         source.job_id)
            resume = restore_latest(manifest, store, prefix, uploader.directory)
        except (CloudError, ValueError, OSError) as exc:
            raise AttemptEnded(Outcome.SYNC_FAILED, f"restoring the latest checkpoint failed: {exc}") from exc
        if resume is not None:
            uploader.resumed_from(resume.name, own)
            entry = manifest.latest()
            self.board.set_checkpoints(0, entry.step if entry and own else None)
        return resume

    def _topology(self, spec: JobSpec) -> Topology:
        train = spec.train
        nproc = train.nproc_per_node if isinstance(train.nproc_per_node, int) else \
            (gpus.visible_gpu_count() or train.cpu_nproc)
        rdzv = None
        if self.cfg.nnodes > 1:
            key = self.layout.rendezvous(self.cfg.attempt)
            if self.cfg.node_rank == 0:
                rdzv = rendezvous.publish(self.state, key, self.metadata, self.instance_id)
            else:
                rdzv = rendezvous.wait_for(self.state, key, self.stop)
                rendezvous.reach(rdzv, self.cfg.node_rank, self.cfg.security_groups, self.stop)
        return Topology(nnodes=self.cfg.nnodes, min_nodes=train.elastic_min_nodes, nproc_per_node=nproc,
                        max_restarts=train.max_restarts, run_id=f"{self.cfg.job_id}-{self.cfg.attempt}",
                        rendezvous=rdzv)

    def _train(self, spec: JobSpec, folders: Folders, uploader: CheckpointUploader, resume: Path | None) -> TrainingEnd:
        try:
            line = shell_line(spec.train.command, self._topology(spec))
        except CommandError as exc:
            raise AttemptEnded(Outcome.TRAINING_FAILED, str(exc)) from exc
        folders.checkpoints.mkdir(parents=True, exist_ok=True)
        folders.outputs.mkdir(parents=True, exist_ok=True)
        self.paths.progress.unlink(missing_ok=True)
        log.info("training: %s (resume from %s)", line, resume or "nothing")
        env = self._env(spec, folders, str(resume or ""), self._training_secrets())
        if self._container is None:
            self._training = Launched(["bash", "-c", line], self.paths.workdir, env, self.paths.run_log,
                                      record=self.paths.training_pid)
        else:
            # The agent ignores the checkpoint signal and its children inherit that (trainkit installs its handler):
            # inside, bash does the same for the training, which is not the agent's child.
            command = ["bash", "-c", f"trap '' {CHECKPOINT_SIGNAL.name.removeprefix('SIG')}; {line}"]
            args = self._container.run_args(self._passed(env), self.paths.workdir, command)
            self._training = ContainerLaunched(self._container, args, self.paths.workdir, env, self.paths.run_log,
                                               record=self.paths.training_pid)
        checkpoints = Periodic("checkpoints", CHECKPOINT_POLL_SECONDS, uploader.tick).start()
        try:
            end = Supervisor(self._training, self.paths.progress, self.board, self.stop, uploader,
                             spec.train.hang_timeout).run()
        finally:
            checkpoints.stop()
            if self._training.poll() is None:  # an agent error while supervising: leave nothing running
                self._training.stop(grace=10)
            self.paths.training_pid.unlink(missing_ok=True)
        if end.outcome == Outcome.TRAINING_FAILED and end.exit_code == 1:
            code = worker_exit_code(self.paths.run_log)
            if code is not None and code != 1:
                end = replace(end, exit_code=code, reason=f"a training process exited with {code}")
        log.info("training ended: %s (exit code %s)", end.outcome.value, end.exit_code)
        return end

    def _after_training(self, end: TrainingEnd, uploader: CheckpointUploader, folders: Folders) -> TrainingEnd:
        request = self.stop.current
        deadline = request.deadline - UPLOAD_MARGIN_SECONDS if request is not None \
            else time.monotonic() + AFTER_TRAINING_UPLOAD_SECONDS
        if end.outcome in (Outcome.SUCCEEDED, Outcome.CANCELLED):
            self.board.set_phase(Phase.UPLOADING)
        if not uploader.drain(deadline):
            log.warning("some checkpoints were not uploaded in time")
        if end.outcome in (Outcome.SUCCEEDED, Outcome.CANCELLED):
            try:
                self.outputs_uploaded = upload_outputs(folders.outputs, self.stores.bucket(self.cfg.outputs.bucket),
                                                       self.cfg.outputs.prefix)
            except (CloudError, OSError) as exc:
                raise AttemptEnded(Outcome.AGENT_ERROR, f"{end.reason}, but uploading the outputs failed: {exc}",
                                   exit_code=end.exit_code) from exc
        return end

    def _pull(self, spec: ContainerSpec, folders: Folders) -> Container:
        """The job's image on this node: there already (a snapshot of an earlier job keeps the node's images, so
        image.from_job boots with it), or pulled after the login; the container to run it in."""
        runtime = container.ensure_runtime(self.paths.run_log)
        image = container.local_name(spec.image, self.cfg.docker_hub_mirror)
        size = container.image_size(runtime, image)
        if size is not None:
            said = f"{spec.image} is on this node already ({size / 1e6:.0f} MB): not pulled"
        else:
            self._login(runtime, spec)
            seconds = container.pull(runtime, spec.image, self.paths.run_log, self.stop, self.cfg.docker_hub_mirror)
            size = container.image_size(runtime, image)
            mb = "size unknown" if size is None else f"{size / 1e6:.0f} MB"
            said = f"pulled {spec.image} in {seconds:.0f} s ({mb})"
        log.info("%s", said)
        self.board.set_phase(Phase.PULLING, said)
        return Container(runtime, image, f"cvmjob-{self.cfg.job_id}-{self.cfg.attempt}-{self.cfg.node_rank}",
                         mounts=(self.paths.workdir, folders.data, self.paths.progress.parent),
                         shm_size=spec.shm_size, gpus=gpus.visible_gpu_count() > 0,
                         rdma=Path("/dev/infiniband").exists())

    def _login(self, runtime: container.Runtime, spec: ContainerSpec) -> None:
        """container.login: the controller's TCR token, or two of the job's secrets (none: a public image)."""
        login = spec.login
        if login is not None and login.tcr is not None:
            token = registry_token(self.cfg, time.time())
            if token is None:
                raise AttemptEnded(Outcome.AGENT_ERROR, f"container.login.tcr {login.tcr}: the controller gave no "
                                                        "registry token (agent.json has none)")
            container.login(runtime, token.registry, token.username, token.token)
        elif login is not None and login.username_secret and login.password_secret:
            container.login(runtime, image_host(spec.image), self._secrets[login.username_secret],
                            self._secrets[login.password_secret])

    def _training_secrets(self) -> dict[str, str]:
        """The job's secrets less the registry's login, which is the agent's alone."""
        login = self.spec.container.login if self.spec.container is not None else None
        held = () if login is None else login.secrets
        return {name: value for name, value in self._secrets.items() if name not in held}

    @staticmethod
    def _passed(env: dict[str, str]) -> dict[str, str]:
        """What a container is given of the training's environment: all but the host's own (its PATH, HOME,
        the emulator's variables), which would break the image's."""
        return {name: value for name, value in env.items() if os.environ.get(name) != value}

    def _env(self, spec: JobSpec, folders: Folders, resume_from: str,
             secrets: dict[str, str] | None = None) -> dict[str, str]:
        contract = {
            TrainingEnv.DATA_DIR: str(folders.data),
            TrainingEnv.CHECKPOINT_DIR: str(folders.checkpoints),
            TrainingEnv.OUTPUT_DIR: str(folders.outputs),
            TrainingEnv.RESUME_FROM: resume_from,
            TrainingEnv.JOB_ID: self.cfg.job_id,
            TrainingEnv.ATTEMPT: str(self.cfg.attempt),
            TrainingEnv.PROGRESS_FILE: str(self.paths.progress),
        }
        if spec.checkpoints.interval_steps is not None:
            contract[TrainingEnv.CHECKPOINT_INTERVAL] = str(spec.checkpoints.interval_steps)
        return training_env(os.environ, {k.value: v for k, v in contract.items()}, spec.train.env,
                            {**self._socket_env(), **self._pip_env()}, secrets)

    def _pip_env(self) -> dict[str, str]:
        """The index the controller chose for pip (Tencent's in-VPC mirror without a public IP)."""
        index = self.cfg.pip_index
        return {} if index is None else {"PIP_INDEX_URL": index, "PIP_TRUSTED_HOST": urlsplit(index).hostname or ""}

    def _socket_env(self) -> dict[str, str]:
        """The collectives' interface: the one holding the address this node publishes for the rendezvous. Only
        between nodes: one node's processes talk over loopback and shared memory, and need no metadata for it."""
        if self.cfg.nnodes == 1:
            return {}
        if self._collectives is None:
            try:
                address = rendezvous.node_address(self.metadata)
            except AttemptEnded as exc:  # no local-ipv4 to go by: NCCL and Gloo choose
                log.warning("no interface named for the collectives: %s", exc)
                return {}
            self._collectives = nic.socket_env(address)
            if self._collectives:
                log.info("collectives on %s (%s)", self._collectives["GLOO_SOCKET_IFNAME"], address)
        return self._collectives
