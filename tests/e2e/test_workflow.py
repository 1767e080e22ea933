"""The workflow a user copies (.github/workflows/retrain.yml, issue 12): its triggers, concurrency and permissions
as the issue says; then its steps as written, parsed from the YAML, on runners of the test's making against the
e2e emulator: keys from GitHub's OIDC token only (no SecretId anywhere in the environment), the summary written to
$GITHUB_STEP_SUMMARY, the gates passing (exit 0) and failing (ci.gate.EXIT_GATE_FAILED)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.errors import EXIT_GATE_FAILED
from tests.e2e.conftest import REPO, Cli
from tests.emulator_process import clean_env
from tests.oidc import AUDIENCE, PROVIDER_ID, RUNNER_BEARER, Issuer, configure, github_token_endpoint

pytestmark = pytest.mark.e2e

WORKFLOW = REPO / ".github" / "workflows" / "retrain.yml"
SPEC = "jobs/quickstart/job.yaml"
INSTALL, RETRAIN = "Install cvmjob", "Retrain if the inputs changed"
# What the CI role's keys may do here: what a run calls, CVM, COS and the VPC's network (AssumeRoleWithWebIdentity
# is unsigned).
CI_ROLE_POLICY = {"version": "2.0", "statement": [
    {"effect": "allow", "action": ["name/cvm:*", "name/cos:*", "name/vpc:*"], "resource": ["*"]}]}
INSTANCE_ROLE = "cvmjob-instance"
UNREACHABLE_GATE = "val_loss<=0.0001"
GATE = re.compile(r'--gate "([^"]+)"')
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
STEP_SECONDS = 540  # the quickstart trains in about a minute; a hung step fails before pytest's 600 s would


def load_workflow() -> dict[str, Any]:
    workflow: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    # PyYAML reads YAML 1.1, where the key `on` is the boolean true; GitHub reads it as the string.
    workflow["on"] = workflow.pop(True)
    return workflow


def the_job(workflow: dict[str, Any]) -> dict[str, Any]:
    (job,) = workflow["jobs"].values()
    assert isinstance(job, dict)
    return job


def step(job: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [s for s in job["steps"] if s.get("name") == name]
    assert isinstance(found, dict)
    return found


def test_the_workflow_retrains_on_changes_nightly_and_by_hand_one_run_per_ref_with_oidc_only() -> None:
    workflow = load_workflow()
    on = workflow["on"]
    assert set(on) == {"push", "schedule", "workflow_dispatch"}
    assert "jobs/quickstart/**" in on["push"]["paths"]
    (schedule,) = on["schedule"]
    minute, hour, *every_day = schedule["cron"].split()
    assert minute.isdigit() and hour.isdigit() and every_day == ["*", "*", "*"]
    assert workflow["concurrency"] == {"group": "retrain-${{ github.ref }}", "cancel-in-progress": True}
    assert workflow["permissions"] == {"id-token": "write", "contents": "read"}
    job = the_job(workflow)
    assert job["env"] == {name: f"${{{{ vars.{name} }}}}" for name in (
        "TENCENTCLOUD_ROLE_ARN", "TENCENTCLOUD_OIDC_PROVIDER_ID", "TENCENTCLOUD_APPID", "CVMJOB_INSTANCE_ROLE")}
    text = WORKFLOW.read_text()
    assert "TENCENTCLOUD_SECRET" not in text and "secrets." not in text
    command = step(job, RETRAIN)["run"]
    assert command.startswith(f"cvmjob run {SPEC} --if-changed --output json --summary markdown ")
    assert "val_loss<=0.90" in GATE.findall(command)


@dataclass
class Runner:
    """One run of the job on a fresh GitHub-hosted runner: its own home (so no ~/.cvmjob and no
    ~/.tencentcloud), the checkout in its workspace, and the variables GitHub sets."""

    root: Path
    cli: Cli
    token_url: str
    variables: dict[str, str]  # the repository's `vars`

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def summary(self) -> Path:
        return self.root / "step_summary.md"

    def checkout(self) -> None:
        """What actions/checkout leaves: the files the job reads. A copy, so the step's retrain.json stays out of
        the repository."""
        for folder in (Path("jobs") / "quickstart", Path(".github")):
            shutil.copytree(REPO / folder, self.workspace / folder,
                            ignore=shutil.ignore_patterns("__pycache__", "outputs", "checkpoints"))

    def env(self, job: dict[str, Any]) -> dict[str, str]:
        base = {k: v for k, v in clean_env().items()
                if not k.startswith(("TENCENTCLOUD_", "CVMJOB_", "GITHUB_", "ACTIONS_")) and k != "CI"}
        home = self.root / "home"
        home.mkdir(parents=True)
        event = self.root / "event.json"
        event.write_text(json.dumps({"repository": {"default_branch": "main", "full_name": "example/models"}}))
        env = {
            **base,
            "HOME": str(home),
            # actions/setup-python and the install step put `cvmjob` on PATH: here, the test's own venv.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', '')}",
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "GITHUB_EVENT_NAME": "push",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_REPOSITORY": "example/models",  # tests.oidc's role trusts repo:example/*
            "GITHUB_REF": "refs/heads/main",
            "GITHUB_REF_NAME": "main",
            "GITHUB_SHA": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_RUN_ID": "1",
            "ACTIONS_ID_TOKEN_REQUEST_URL": self.token_url,  # what `permissions: id-token: write` gives a job
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": RUNNER_BEARER,
            # The one departure from a real runner: the cloud is the e2e emulator, not Tencent Cloud.
            "CVMJOB_ENDPOINT": self.cli.emulator.endpoint,
            **{name: self.expand(value) for name, value in job["env"].items()},
        }
        secrets = (self.cli.emulator.secret_id, self.cli.emulator.secret_key)
        assert not [k for k in env if k.startswith("TENCENTCLOUD_SECRET")]
        assert not [k for k, v in env.items() if any(s in v for s in secrets)]
        return env

    def expand(self, text: str) -> str:
        """GitHub's `${{ vars.NAME }}`; any other expression where a step runs would be one this runner ignores."""

        def value(match: re.Match[str]) -> str:
            context, _, name = match.group(1).partition(".")
            assert context == "vars", match.group(0)
            return self.variables[name]

        return EXPRESSION.sub(value, text)

    def run(self, job: dict[str, Any], commands: Mapping[str, str]) -> dict[str, subprocess.CompletedProcess[str]]:
        """The job's steps in order, as GitHub runs them: `run:` with `bash -e` (its default shell) in the workspace,
        the command of a step named in ``commands`` replaced; after a failed step only `if: always()` ones run.
        Returns each `run:` step's process, by name."""
        self.checkout()
        env = self.env(job)
        ran: dict[str, subprocess.CompletedProcess[str]] = {}
        failed = False
        for each in job["steps"]:
            assert each.get("if") in (None, "always()"), each
            if failed and each.get("if") is None:
                continue
            if "uses" in each:
                self.uses(each)
                continue
            done = self.shell(self.expand(commands.get(each["name"], each["run"])), env)
            ran[each["name"]] = done
            failed = failed or done.returncode != 0
        return ran

    def shell(self, script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        argv = ["bash", "-e", "-c", script]
        with subprocess.Popen(argv, env=env, cwd=self.workspace, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True) as process:
            try:
                stdout, stderr = process.communicate(timeout=STEP_SECONDS)
            finally:
                # What the runner does at a step's end, or its timeout: whatever the step started goes with it.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
        return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)

    def uses(self, action: dict[str, Any]) -> None:
        """actions/checkout is Runner.checkout and actions/setup-python the test's interpreter (on PATH): both done.
        actions/upload-artifact would upload its path, which must be there."""
        name = action["uses"].split("@")[0]
        assert name in ("actions/checkout", "actions/setup-python", "actions/upload-artifact"), name
        if name == "actions/upload-artifact":
            assert (self.workspace / action["with"]["path"]).is_file(), action


def test_the_workflows_steps_retrain_with_oidc_keys_summarise_and_gate(cli: Cli, tmp_path: Path) -> None:
    job = the_job(load_workflow())
    # This venv has cvmjob installed (editable) and the machine reaches no package index: the install step is
    # replaced by a check that what it installs is there, the one command of the workflow not run as written.
    assert step(job, INSTALL)["run"] == "pip install ."
    installed = {INSTALL: "cvmjob run --help > /dev/null"}
    retrain = step(job, RETRAIN)["run"]
    gates = GATE.findall(retrain)
    issuer = Issuer()
    variables = {"TENCENTCLOUD_ROLE_ARN": configure(cli.emulator, issuer, CI_ROLE_POLICY),
                 "TENCENTCLOUD_OIDC_PROVIDER_ID": PROVIDER_ID, "TENCENTCLOUD_APPID": cli.emulator.appid,
                 "CVMJOB_INSTANCE_ROLE": INSTANCE_ROLE}

    def exchanges() -> int:
        return len(cli.emulator.admin.calls(service="sts", action="AssumeRoleWithWebIdentity"))

    with github_token_endpoint(issuer, cli.emulator.admin.now) as (token_url, requests):
        first = Runner(tmp_path / "runner-1", cli, token_url, variables)
        ran = first.run(job, installed)
        assert [ran[n].returncode for n in (INSTALL, RETRAIN)] == [0, 0], ran[RETRAIN].stderr[-3000:]
        view = json.loads((first.workspace / "retrain.json").read_text())
        assert (view["state"], view["up_to_date"]) == ("SUCCEEDED", False), view.get("reason")
        # The keys were the role's: the emulator's root key is random (tests/e2e/conftest.py) and in no variable.
        assert exchanges() >= 1
        assert requests and all(r == {"authorization": f"bearer {RUNNER_BEARER}", "api-version": "2.0",
                                      "audience": AUDIENCE} for r in requests)
        summary = first.summary.read_text()
        assert summary.startswith("## ✅ quickstart: SUCCEEDED\n"), summary
        assert "| metric | this run |" in summary and "| `val_loss` |" in summary, summary
        assert re.search(r"^- \*\*Cost:\*\* \d+\.\d\d CNY$", summary, re.MULTILINE), summary
        assert all(f"- ✅ `{gate}`" in summary for gate in gates), summary

        # Another runner, the same inputs, a gate no model of the quickstart meets: the job trained above is reused
        # (no instance), its metrics miss the gate, and the step fails with the gate's own exit code.
        launched, traded = len(cli.emulator.admin.instances()), exchanges()
        strict, replaced = re.subn(r'--gate "val_loss<=[^"]+"', f'--gate "{UNREACHABLE_GATE}"', retrain)
        assert replaced == 1
        second = Runner(tmp_path / "runner-2", cli, token_url, variables)
        ran = second.run(job, {**installed, RETRAIN: strict})
        gated = ran[RETRAIN]
        assert gated.returncode == EXIT_GATE_FAILED, gated.stderr[-3000:]
        assert re.search(rf"^gate {re.escape(UNREACHABLE_GATE)}: val_loss=[\d.]+ > 0\.0001 \(missed by [\d.]+\)$",
                         gated.stderr, re.MULTILINE), gated.stderr[-3000:]
        reused = json.loads((second.workspace / "retrain.json").read_text())  # upload-artifact's, if: always()
        assert (reused["up_to_date"], reused["job_id"]) == (True, view["job_id"]), reused
        assert len(cli.emulator.admin.instances()) == launched and exchanges() > traded
    summary = second.summary.read_text()
    assert summary.startswith(f"## ❌ quickstart: SUCCEEDED, 1 of {len(gates)} gates failed\n"), summary
    assert "Training was skipped" in summary and f"- ❌ `{UNREACHABLE_GATE}`" in summary, summary
