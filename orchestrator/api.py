"""Library entry points (the CLI is a thin layer over these): plan, submit, hand over to a controller, follow
logs, cancel, wait, gc."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Any, Literal

from .agent.manifest import entries_of, read_manifest
from .billing import funds
from .billing import pool as pools
from .ci import fingerprint
from .ci.facts import default_branch, labels_from, run_facts
from .contract import (
    Fingerprint,
    FingerprintEntry,
    JobLayout,
    Location,
    Manifest,
    Result,
    ResumeSource,
    RunFacts,
    Status,
    checkpoints_location,
    latest_key,
)
from .contract.tags import TAG_JOB, TAG_MANAGED, TAG_NAME, TAG_OWNER, owner
from .errors import EXIT_CLOUD_ERROR, CvmjobError
from .lifecycle.observe import read_node_doc
from .notify.deliver import Deliverer
from .notify.events import for_gate
from .plan.configure import settings_for
from .plan.images import too_old
from .plan.models import Plan
from .plan.planner import Facts, NetworkFacts, PlanError, PublicImage, make_plan
from .plan.registry import registry_unreachable
from .plan.settings import Settings
from .policy.loader import load_job
from .providers.tencent import TencentSdk, buckets, compute, images, network, registry
from .providers.tencent.errors import CapacityError, CloudError, NotFoundError, StateConflictError
from .providers.tencent.retry import retrying
from .providers.tencent.storage import ObjectStore
from .providers.tencent.vocabulary import ChargeType
from .spec import JobSpec
from .spec.container import docker_hub_name, image_host
from .spec.secrets import with_secrets
from .spec.userconfig import load_user_config, unset_urls, with_user_defaults
from .spec.workload import LATEST_OF
from .staging import bootstrap
from .staging.agent_config import locations
from .staging.launch import launch_request
from .staging.secrets import gather as gather_secrets
from .state import jobdoc
from .state.home import controller_name, cvmjob_home, died_here, state_db, store_url
from .state.machine import JobState
from .state.outbox import Outbox
from .state.store import Event, JobRecord, NewJob, NodeRecord, PoolStore, Store
from .target import Target, connect, embedded, reconnect, resolve
from .target.doctor import Check, run_checks

PLAN_ATTEMPTS = 12  # within retrying's 60 s: throttling under a burst of launches lasts seconds
POLL_SECONDS = 2.0  # following a job from outside its controller: its logs, its end


class JobNotFound(CvmjobError, LookupError):
    """No job, or several, answer to the reference given."""


@dataclass(frozen=True)
class PlanReport:
    spec: JobSpec
    spec_path: Path
    target: Target
    plan: Plan
    settings: Settings  # from the spec and its policies, loaded once
    notes: list[str] = field(default_factory=list)


def new_job_id() -> str:
    return "job-" + secrets.token_hex(4)


JOB_ID = re.compile(r"job-[0-9a-f]{8}")  # new_job_id()'s form: only a full id is looked for in the state bucket
REMOTE_HOW = ("a job of another machine is found in each region's default state bucket (cvmjob-<region>-<APPID>), "
              "or in CVMJOB_STATE_BUCKET of CVMJOB_REGION when set, with this machine's keys")
HOME_REGION = "ap-guangzhou"  # where CVMJOB_STATE_BUCKET is looked for when CVMJOB_REGION is unset


def default_state_bucket(target: Target) -> str:
    """The state bucket of a job this machine did not submit, and the one gc looks in first: CVMJOB_STATE_BUCKET,
    else the region's default."""
    return os.environ.get("CVMJOB_STATE_BUCKET") or state_bucket(None, target)


def region_state_bucket(region: str, appid: str) -> str:
    """A region's default state bucket. One per region: an instance reaches COS of its own region only (across
    regions COS is served on the public network alone), and any machine with the keys finds it by name."""
    return f"cvmjob-{region}-{appid}"


def state_bucket(spec: JobSpec | None, target: Target) -> str:
    """The spec's ``storage.bucket``, else the region's default."""
    return (spec.storage.bucket if spec is not None else None) or region_state_bucket(target.region, target.appid)


def _gather(spec: JobSpec, target: Target, sdk: TencentSdk) -> Facts:
    zones = [z for z, available in compute.zones(sdk) if available and z.rpartition("-")[0] == spec.region]
    charge = ChargeType.for_billing(spec.billing.mode)
    offerings = compute.offerings(sdk, zones, None, charge) if zones else []
    if charge != ChargeType.ON_DEMAND and zones:
        offerings += compute.offerings(sdk, zones, None, ChargeType.ON_DEMAND)
    # Those whose python3 runs the agent: the planner's default never boots one that would fail its bootstrap.
    public_images = [PublicImage(i.image_id, i.name, public=True) for i in images.public(sdk)
                     if too_old(i.os_name) is None]
    return Facts(
        region=spec.region,
        zones=zones,
        offerings=offerings,
        image=_spec_image(spec, sdk),
        public_images=public_images,
        state_bucket=state_bucket(spec, target),
        network=_network_facts(spec, sdk, zones),
        # The account's spot vCPUs per zone (50 by default): a type the quota cannot hold is never planned on spot.
        spot_quotas=compute.spot_quotas(sdk, zones) if charge == ChargeType.SPOT and zones else None,
        hpc_cluster=_hpc_cluster(spec, sdk),
    )


def _hpc_cluster(spec: JobSpec, sdk: TencentSdk) -> compute.HpcCluster | None:
    """The spec's network.hpc_cluster_id as the cloud has it; one PlanError when it has none of that id."""
    wanted = spec.network.hpc_cluster_id
    if wanted is None:
        return None
    found = compute.hpc_clusters(sdk, [wanted]).get(wanted)
    if found is None:
        raise PlanError([f"network.hpc_cluster_id: {wanted} is not an HPC cluster of {spec.region}. create one in "
                         "the zone of the HCC instances (CreateHpcCluster, or the console), or leave it unset"])
    return found


def _network_facts(spec: JobSpec, sdk: TencentSdk, region_zones: list[str]) -> NetworkFacts:
    """The VPC, a subnet per zone and the security groups every launch of the job names (the spec's, else the
    region's defaults: the default VPC, and the default subnet of each zone the job may use, made where the account
    has none); one PlanError naming what does not exist and how to fix it."""
    wanted = spec.network
    problems: list[str] = []
    made: list[str] = []
    vpc = wanted.vpc_id or network.default_vpc(sdk)
    zones = [z for z in (spec.zones or region_zones) if z in region_zones]
    if vpc is None and zones:
        vpc, first = network.create_default_vpc(sdk, zones[0])
        made.append(f"network: created the default VPC {vpc} of {spec.region} (the account had none), with the "
                    f"default subnet {first} of {zones[0]}")
    if vpc is None:
        raise PlanError([f"network.vpc_id: {spec.region} has no default VPC in this account. set network.vpc_id "
                         "to yours"])
    if wanted.vpc_id is not None and not network.vpc_exists(sdk, vpc):
        raise PlanError([f"network.vpc_id: {vpc} does not exist in {spec.region}. check the id, or leave it unset "
                         "for the default VPC"])
    found = network.subnets(sdk, vpc)
    by_id = {s.subnet_id: s for s in found}
    for zone, subnet_id in wanted.subnet_ids.items():
        subnet = by_id.get(subnet_id)
        if subnet is None or subnet.zone != zone:
            where = "is not a subnet of " + vpc if subnet is None else f"is in {subnet.zone}"
            problems.append(f"network.subnet_ids.{zone}: {subnet_id} {where}. name a subnet of {vpc} in {zone}")
    if wanted.vpc_id is None and not wanted.subnet_ids:  # the default VPC: each zone gets its default subnet
        for zone in sorted(set(zones) - {s.zone for s in found}):
            _, made_id = network.create_default_vpc(sdk, zone)
            found.append(network.Subnet(made_id, vpc, zone, is_default=True))
            made.append(f"network: created the default subnet {made_id} of {zone} in {vpc}")
    subnets = dict(wanted.subnet_ids) or {
        zone: min((s for s in found if s.zone == zone), key=lambda s: (not s.is_default, s.subnet_id)).subnet_id
        for zone in {s.zone for s in found}}
    groups = list(wanted.security_groups)
    missing = sorted(set(groups) - network.security_groups(sdk, groups))
    problems += [f"network.security_groups: {g} does not exist in {spec.region}" for g in missing]
    if problems:
        raise PlanError(problems)
    return NetworkFacts(vpc_id=vpc, subnets=subnets, security_group_ids=groups, made=made)


def _with_cvmjob_group(plan_: Plan, sdk: TencentSdk, spec: JobSpec) -> tuple[Plan, list[str]]:
    """The plan with the region's cvmjob security group when the spec names none (made once, when a plan first
    needs it: the DryRun names it as the launch will), and what the plan says of it when it was made now."""
    if plan_.network is None or plan_.network.security_group_ids:
        return plan_, []
    group, created = retrying(lambda: network.ensure_security_group(sdk, TAG_MANAGED), attempts=PLAN_ATTEMPTS)
    said = [f"network: created the cvmjob security group {group} in {spec.region} (its members admit each other "
            "on every port; all egress)"] if created else []
    return plan_.model_copy(update={"network": plan_.network.model_copy(update={"security_group_ids": [group]})}), said


def _spec_image(spec: JobSpec, sdk: TencentSdk) -> PublicImage | None:
    """The image the spec names, looked up; None when it names none (the planner then picks a public one)."""
    wanted = spec.image
    if wanted is None:
        return None
    if wanted.id is not None:
        found = images.describe(sdk, [wanted.id]).get(wanted.id)
        if found is None:
            raise PlanError([f"image.id: {wanted.id} does not exist in {spec.region}. check the id, or use image.name"])
        return _runs_the_agent("image.id", found)
    if wanted.name is not None:
        named = images.find_by_name(sdk, wanted.name)
        if not named:
            raise PlanError([f"image.name: no image named {wanted.name!r} in {spec.region}"])
        return _runs_the_agent("image.name", named[0])
    if wanted.from_job is None:  # only the driver said: the planner picks the image
        return None
    made = [i for i in images.find_by_tags(sdk, {TAG_NAME: wanted.from_job}) if i.state.ready]
    if not made:
        raise PlanError([f"image.from_job: no ready image made by a job named {wanted.from_job!r} in {spec.region}. "
                         "run that job with snapshot.enabled: true first, or use image.id"])
    newest = max(made, key=lambda i: i.created() or datetime.min)
    return PublicImage(newest.image_id, newest.name, public=False)


def _runs_the_agent(field: str, image: images.ImageView) -> PublicImage:
    """The image, unless it is a public one whose python3 is older than the agent's (a custom image may have had a
    newer one installed: its preflight tells)."""
    why = too_old(image.os_name) if image.public else None
    if why is not None:
        raise PlanError([f"{field}: {image.name}: {why}. use Ubuntu Server 22.04 or 24.04, or an image with a newer "
                         "python3"])
    return PublicImage(image.image_id, image.name, public=image.public)


def _check_storage(spec: JobSpec, sdk: TencentSdk, plan: Plan) -> tuple[dict[str, str], list[str]]:
    """Buckets and prefixes the job reads must exist, in the job's region unless network.allow_cross_region lets
    them be elsewhere (the state bucket never); returns those elsewhere with their regions (Plan.bucket_regions),
    and notes for what will be created or crosses regions."""
    problems: list[str] = []
    notes: list[str] = []
    where = buckets.regions(sdk)  # the account's buckets; another account's (shared data) is not listed
    elsewhere: dict[str, str] = {}
    for name, bucket in _buckets_of(spec, plan):
        region = where.get(bucket, spec.region)
        if region == spec.region:
            continue
        if spec.network.allow_cross_region and name != "storage.bucket":
            elsewhere[bucket] = region
            notes.append(f"{name}: bucket {bucket} is in {region}: reached over the public network "
                         "(network.allow_cross_region), slower than COS of the job's region and billed as traffic")
            continue
        why = ("the agents and the controller keep the job's state there: name a bucket of the job's region, or "
               "leave storage.bucket unset") if name == "storage.bucket" else (
            f"use a bucket in {spec.region} (copy the data there), run the job in {region}, or set "
            "network.allow_cross_region with network.public_ip")
        problems.append(f"{name}: bucket {bucket} is in {region} and the job runs in {spec.region}: Tencent "
                        "serves COS across regions on the public network only, which the instances do not reach "
                        f"without a public IP (and which bills the traffic). {why}")
    if problems:
        raise PlanError(problems)

    def store(bucket: str) -> ObjectStore:
        return ObjectStore(sdk.for_region(elsewhere.get(bucket, spec.region)), bucket)

    for index, source in enumerate(spec.data):
        data = store(source.source.bucket)
        if not data.bucket_exists():
            problems.append(
                f"data.{index}.source: bucket {source.source.bucket} does not exist. create it or fix the bucket name"
            )
        elif next(data.iter_objects(source.source.prefix), None) is None:
            problems.append(f"data.{index}.source: {source.source} is empty. upload the data or fix the prefix")
    for name, uri in (
        ("checkpoints.upload_to", spec.checkpoints.upload_to),
        ("outputs.upload_to", spec.outputs.upload_to),
    ):
        if uri is not None and not store(uri.bucket).bucket_exists():
            problems.append(f"{name}: bucket {uri.bucket} does not exist. create it or leave {name} unset")
    if not ObjectStore(sdk, plan.state_bucket).bucket_exists():
        notes.append(f"the state bucket {plan.state_bucket} will be created")
    if problems:
        raise PlanError(problems)
    return elsewhere, notes


def _buckets_of(spec: JobSpec, plan: Plan) -> list[tuple[str, str]]:
    """(the spec field that names it, the bucket) for every bucket the job's instances read or write."""
    named = [(f"data.{i}.source", d.source.bucket) for i, d in enumerate(spec.data)]
    named += [(name, uri.bucket) for name, uri in (("checkpoints.upload_to", spec.checkpoints.upload_to),
                                                    ("outputs.upload_to", spec.outputs.upload_to)) if uri is not None]
    return [*named, ("storage.bucket", plan.state_bucket)]


def job_checkpoints(job: JobRecord) -> Location:
    """Where the job's checkpoints and their manifest are (contract.checkpoints_location, from its spec's
    ``checkpoints.upload_to`` and its plan's state bucket)."""
    return checkpoints_location(job.job_id, job.plan.state_bucket, job.spec.checkpoints.upload_to)


def result_place(job: JobRecord, which: Literal["outputs", "checkpoints"]) -> tuple[ObjectStore, Location]:
    """Where the job's outputs or checkpoints are (as its agents were told), and the bucket to read them through,
    in its own region (Plan.bucket_regions)."""
    place = getattr(locations(job.job_id, job.spec, job.plan.state_bucket), which)
    sdk = connect(reconnect(job.target))
    return ObjectStore(sdk.for_region(job.plan.bucket_regions.get(place.bucket, sdk.region)), place.bucket), place


def _latest_checkpoint(sdk: TencentSdk, job: JobRecord) -> tuple[Location, int] | None:
    """The job's checkpoints location and the step of its latest complete checkpoint; None when it has none."""
    manifest = checkpoint_manifest(job, sdk)
    latest = None if manifest is None else entries_of(manifest, job.job_id)[0].latest()
    return None if latest is None else (job_checkpoints(job), latest.step)


def _resume_source(spec: JobSpec, sdk: TencentSdk, store: Store) -> tuple[ResumeSource | None, list[str]]:
    """``checkpoints.resume_from`` resolved against the store: the job to start from and where its checkpoints are,
    and what the plan says of it. A job named by its id must have a complete checkpoint (else one PlanError:
    nothing is created); ``latest-of:NAME`` takes the newest job of that name that has one, or none (a fresh
    start, said). Resolved once, here: every attempt of the job starts from the same source."""
    wanted, what = spec.checkpoints.resume_from, "checkpoints.resume_from"
    if wanted is None:
        return None, []
    if wanted.startswith(LATEST_OF):
        name = wanted.removeprefix(LATEST_OF)
        for job in store.named(name):  # newest first
            if job.target.region == spec.region and \
                    (found := _latest_checkpoint(sdk, job)) is not None:
                return ResumeSource(job_id=job.job_id, checkpoints=found[0]), [
                    f"{what}: starts from step {found[1]} of {job.job_id} (the newest job named {name} with a "
                    "checkpoint) until it has a checkpoint of its own"]
        return None, [f"{what}: no job named {name} in {spec.region} has a complete checkpoint: the job starts fresh"]
    try:
        job = find_job(store, wanted, names=False)  # a job named like an id's prefix is no id
    except JobNotFound as exc:
        raise PlanError([f"{what}: {exc}"]) from exc
    region = job.target.region
    if region != spec.region:
        raise PlanError([f"{what}: {job.job_id} ran in {region}, and this job's instances in {spec.region} cannot "
                         f"read its checkpoints. name a job of {spec.region}"])
    found = _latest_checkpoint(sdk, job)
    if found is None:
        where = job_checkpoints(job)
        raise PlanError([f"{what}: {job.job_id} has no complete checkpoint (cos://{where.bucket}/{where.prefix}). "
                         "name a job that wrote one, or use latest-of:<job name>"])
    return ResumeSource(job_id=job.job_id, checkpoints=found[0]), [
        f"{what}: starts from step {found[1]} of {job.job_id} until it has a checkpoint of its own"]


def _source_elsewhere(spec: JobSpec, store: Store, source: ResumeSource | None) -> dict[str, str]:
    """The region of the checkpoints a job resumes from when they are in another region (the source job's
    network.allow_cross_region put them there), which this job must allow too."""
    job = None if source is None else store.get(source.job_id)
    if source is None or job is None:
        return {}
    bucket = source.checkpoints.bucket
    region = job.plan.bucket_regions.get(bucket)
    if region is None:
        return {}
    if not spec.network.allow_cross_region:
        raise PlanError([f"checkpoints.resume_from: the checkpoints of {job.job_id} are in bucket "
                         f"{bucket} of {region}, which this job's instances reach over the public network only. set "
                         "network.allow_cross_region with network.public_ip"])
    return {bucket: region}


class Gathered:
    """The cloud's facts for planning (zones, offerings, images), gathered once for every spec that needs the same
    ones: a sweep plans each dispatch round's trials from one gathering, not one per trial."""

    def __init__(self) -> None:
        self._facts: dict[str, Facts] = {}

    def facts(self, spec: JobSpec, target: Target, sdk: TencentSdk) -> Facts:
        # What _gather reads depends on these alone (a sweep may vary any of them across its trials).
        key = json.dumps([spec.region, spec.billing.mode, spec.image and spec.image.model_dump(mode="json"),
                          state_bucket(spec, target), target.to_json(), spec.zones,
                          spec.network.model_dump(mode="json")], sort_keys=True)
        if key not in self._facts:
            self._facts[key] = retrying(lambda: _gather(spec, target, sdk), attempts=PLAN_ATTEMPTS)
        return self._facts[key]


def plan(
    spec_path: Path, overrides: list[str] | None = None, force_emulator: bool = False, name: str | None = None,
    document: dict[str, Any] | None = None, store: Store | None = None,
    avoid: Mapping[tuple[str, str], str] | None = None, gathered: Gathered | None = None,
    secret_names: Sequence[str] = (),
) -> PlanReport:
    """Everything `cvmjob plan` shows; no side effects but the region's cvmjob security group, made the first time
    a plan needs it (the only other write-like call is a DryRun). ``document``: the
    spec's mapping, already read (a sweep's trial); ``spec_path`` is still where its relative paths start.
    ``store``: where ``checkpoints.resume_from`` is looked up (default: this machine's). ``avoid``: placements
    (zone, instance type) the plan must not use, and why. ``gathered``: the cloud's facts, shared with other
    plans (default: gathered for this one). ``secret_names``: names added to the spec's (`run --secret`); each must be
    set in this environment, where submit reads their values."""
    overrides = list(overrides or [])
    if name:
        overrides.append(f"name={name}")
    spec, policies = load_job(spec_path, overrides, document)
    spec = with_secrets(spec, secret_names)
    gather_secrets(spec.secrets, os.environ)  # a missing one is said before anything is made
    spec = with_user_defaults(spec, load_user_config(cvmjob_home()))
    if unset := unset_urls(spec.notify, os.environ):
        raise PlanError(unset)
    settings = settings_for(spec, policies.recovery, policies.pool)
    target = resolve(spec.region, force_emulator)
    sdk = connect(target)
    # Every call here is a read (or a DryRun): retried while throttled, so that many jobs can start at once.
    fallback = (spec.billing.mode == "spot" and settings.recovery.falls_back_to_on_demand) or (
        spec.billing.mode == "reserved" and settings.pool_when_busy == "on-demand"
    )
    facts = (gathered or Gathered()).facts(spec, target, sdk)
    plan_, notes = _with_cvmjob_group(make_plan(spec, facts, fallback, avoid), sdk, spec)
    notes = ([] if facts.network is None else list(facts.network.made)) + notes
    elsewhere, said = retrying(lambda: _check_storage(spec, sdk, plan_), attempts=PLAN_ATTEMPTS)
    plan_ = plan_.model_copy(update={"bucket_regions": elsewhere})
    notes += said
    if spec.container is not None and (registry_id := spec.container.tcr) is not None:
        try:
            linked = retrying(lambda: registry.linked_vpcs(sdk, registry_id), attempts=PLAN_ATTEMPTS)
        except NotFoundError as exc:
            raise PlanError([f"container.login.tcr: {spec.region} has no container registry {registry_id}: name an "
                             f"enterprise instance of {spec.region} (the TCR console lists them), or run the job in "
                             "the instance's region"]) from exc
        if (problem := registry_unreachable(registry_id, image_host(spec.container.image), plan_.network,
                                            linked)) is not None:
            raise PlanError([problem])
    if (spec.container is not None and docker_hub_name(spec.container.image) is not None
            and (hub := bootstrap.docker_hub_mirror(plan_)) is not None):
        notes.append(f"container: {spec.container.image} is on Docker Hub, which an instance without a public IP "
                     f"reaches only through Tencent's mirror: pulled from {hub}; network.public_ip pulls it directly")
    if (mirror := bootstrap.pip_index(plan_)) is not None:
        notes.append(f"network: no public IP, so pip (the bootstrap's, setup's and the training's) installs from "
                     f"Tencent's in-VPC mirror {mirror}; network.public_ip gives the instances the internet")
    if plan_.gpu_driver is not None:
        notes.append(f"image: {plan_.image_name} has no GPU driver: the {plan_.gpu_driver.label()} installs at boot "
                     f"(Tencent's auto-install, about 10 minutes of the {spec.limits.bootstrap_timeout // 60:g}-minute "
                     "limits.bootstrap_timeout); a snapshot of the job keeps it, and image.from_job skips the install")
    if spec.checkpoints.resume_from is not None:
        jobs = store if store is not None else Store(store_url())
        source, said = retrying(lambda: _resume_source(spec, sdk, jobs), attempts=PLAN_ATTEMPTS)
        plan_ = plan_.model_copy(update={"resume_from": source,
                                         "bucket_regions": {**plan_.bucket_regions, **_source_elsewhere(spec, jobs,
                                                                                                        source)}})
        notes += said
    if spec.cam_role is None and sdk.credential.get_credential_info()[2]:
        # The agents' short-lived keys come from GetFederationToken, which STS refuses to temporary keys
        # (FailedOperation.TempKeyNotAllowed): the job would be created, then fail at its launch. After the
        # reads: keys the cloud refuses outright are its own error (exit 3).
        raise PlanError([f"credentials: sts (the default) needs permanent keys to issue the instances' COS keys, and "
                         f"this machine's are temporary ({target.credential_source}): bind a CAM role to the "
                         "instances instead, credentials: role:<instance role> (README, CI retraining)"])
    primary = plan_.primary
    # Before the DryRun, which the cloud refuses too when the balance is short of an hour: one clear line instead.
    first_hour = None if primary.price_per_hour is None else primary.price_per_hour * plan_.nnodes
    need = funds.job_need(plan_.estimated_cost, spec.limits.max_cost, first_hour, plan_.expected_hours)
    funds.ensure(sdk, f"job {spec.name} on {plan_.nnodes} × {primary.label()}", need, notes.append)
    # The job's own request (its disks, role, network, tags, price cap and UserData), less its timer.
    probe = launch_request(spec, primary, plan_.image_id, client_token="cvmjob-plan-dry-run",
                           name=f"cvmjob-{spec.name}", tags={}, network=plan_.network,
                           user_data_b64=bootstrap.for_dry_run(plan_, primary.instance_type))
    if primary.charge_type == ChargeType.RESERVED:
        notes.append(_pool_note(spec, plan_, sdk))
        return PlanReport(spec, spec_path, target, plan_, settings, notes)
    try:
        retrying(lambda: compute.dry_run(sdk, probe), attempts=PLAN_ATTEMPTS)
        price = retrying(lambda: compute.inquiry_price(sdk, probe), attempts=PLAN_ATTEMPTS)
    except CapacityError as exc:
        # Stock is a moment's truth (other launches took it since DescribeZoneInstanceConfigInfos): the launch tries
        # again and moves along the candidates as the recovery policy says, rather than `run` failing here (exit 3).
        notes.append(f"{primary.label()} answers {exc.code} now: the launch retries, then tries the next placement")
        return PlanReport(spec, spec_path, target, plan_, settings, notes)
    if price.per_hour is not None:
        plan_ = plan_.model_copy(update={
            "candidates": [primary.model_copy(update={"price_per_hour": price.per_hour}), *plan_.candidates[1:]],
            "estimated_cost": round(price.per_hour * plan_.nnodes * plan_.expected_hours, 2)})
    return PlanReport(spec, spec_path, target, plan_, settings, notes)


def _pool_note(spec: JobSpec, plan_: Plan, sdk: TencentSdk) -> str:
    """Reserved jobs buy nothing: say how many pool members fit (no DryRun of a purchase that will not happen)."""
    name = spec.billing.pool
    assert name is not None, "only reserved jobs have a pool note"
    members = pools.sync(PoolStore(Store(store_url())), sdk, name, time.time())
    fitting = {(p.zone, p.instance_type) for p in plan_.candidates if p.charge_type == ChargeType.RESERVED}
    matching = [m for m in members if (m.zone, m.instance_type) in fitting]
    idle = [m for m in matching if m.job_id is None]
    return f"reserved pool {name}: {len(idle)} idle of {len(matching)} matching member(s)" + (
        "" if matching else "; `cvmjob pool grow` adds some"
    )


def fingerprint_of(report: PlanReport) -> Fingerprint:
    """The planned job's inputs (`run --if-changed`): its data listings, workdir, spec, image, cvmjob's version."""
    sdk = connect(report.target)
    return retrying(lambda: fingerprint.take(report.spec, report.plan.image_id, report.spec_path.resolve().parent,
                                             sdk, report.plan.bucket_regions))


def reusable(report: PlanReport, taken: Fingerprint) -> FingerprintEntry | None:
    """The succeeded job that trained on exactly these inputs, from the state bucket's index (a CI runner that
    keeps nothing between runs finds it there)."""
    state = ObjectStore(connect(report.target), report.plan.state_bucket)
    return retrying(lambda: fingerprint.lookup(state, taken))


CLAIM_BIRTH_SECONDS = 120.0  # a claim whose job has no job.json yet: its runner is still submitting it


def claim_inputs(report: PlanReport, taken: Fingerprint, waiting: Callable[[str], None],
                 now: Callable[[], float] = time.time) -> FingerprintEntry | str:
    """`run --if-changed`: the succeeded job to reuse, or the id of the job this runner is to submit, having claimed
    the inputs in the state bucket. A job another runner is training on the same inputs is followed (``waiting``
    is told its id) until it ends: reused once it succeeded; a claim whose job ended without an entry in the index
    (failed, cancelled, its data changed) or never came is dropped, and the inputs claimed again."""
    state = ObjectStore(connect(report.target), report.plan.state_bucket)
    told: set[str] = set()
    while True:
        reused = retrying(lambda: fingerprint.lookup(state, taken))
        if reused is not None:
            return reused
        job_id = new_job_id()
        if not retrying(state.bucket_exists):
            retrying(state.create_bucket)
        held = retrying(partial(fingerprint.claim, state, taken, job_id, now()))
        if held is None:
            return job_id
        if _in_flight(state, held, now()):
            if held.job_id not in told:
                waiting(held.job_id)
                told.add(held.job_id)
            time.sleep(POLL_SECONDS)
            continue
        retrying(partial(fingerprint.drop_claim, state, taken, held))


def _in_flight(state: ObjectStore, held: fingerprint.Claim, now: float) -> bool:
    """Whether the claim's job may still succeed: not ended, or not yet submitted by a runner that just claimed."""
    try:
        found = retrying(partial(jobdoc.fetch, state, held.job_id))
    except ValueError:  # a job.json this release cannot read: no job to follow
        return False
    if found is None:
        return now - held.claimed_at < CLAIM_BIRTH_SECONDS
    return not found[0].state.is_terminal()


def submit(report: PlanReport, store: Store, now: Callable[[], float] = time.time,
           lease: tuple[str, float] | None = None, job_id: str | None = None,
           inputs: Fingerprint | None = None) -> str:
    """The job, recorded and PENDING. ``lease``: (owner, ttl) of the controller about to drive it in this process;
    None leaves it to whichever controller claims it. ``job_id``: chosen by the caller, who recorded it first (a
    sweep's trial names its job before the job exists). ``inputs``: its fingerprint (`run --if-changed`), entered
    in the index once it has succeeded on unchanged data."""
    job_id = job_id or new_job_id()
    state = ObjectStore(connect(report.target), report.plan.state_bucket)
    if report.spec.secrets:  # before the job exists: no controller may launch it without them
        _put_secrets(state, JobLayout(job_id).secrets,
                     gather_secrets(report.spec.secrets, os.environ).model_dump(mode="json"))
    created = now()
    store.create_job(
        NewJob(job_id=job_id, name=report.spec.name, spec=report.spec, plan=report.plan, target=report.target,
               settings=report.settings, deadline=created + report.spec.limits.max_runtime,
               source_dir=str(report.spec_path.resolve().parent), fingerprint=inputs, labels=labels_from(os.environ)),
        created, lease=lease)
    # At once, so that another machine can follow the job from its first second (a CI workflow's next step).
    job = store.get(job_id)
    assert job is not None
    jobdoc.publish(state, job, [], store.events(job_id))
    return job_id


def _put_secrets(state: ObjectStore, key: str, doc: dict[str, Any]) -> None:
    """secrets.json in the job's folder of the state bucket (made when missing: a first job's submission comes
    before its staging); the job's agents read it with their scoped keys at every attempt, whichever controller
    launched it."""
    try:
        retrying(lambda: state.put_json(key, doc))
    except NotFoundError:
        retrying(state.create_bucket)
        retrying(lambda: state.put_json(key, doc))


def find_job(store: Store, ref: str, names: bool = True) -> JobRecord:
    """The job ``ref`` names in this store (an id, a unique prefix, or with ``names`` a name); a full job id this
    store does not hold is looked for in the state bucket (a job another machine submitted: a later CI step,
    another runner)."""
    if not ref.strip():
        raise JobNotFound("no job given: name a job id (or a unique prefix, or the job name); `cvmjob ls` lists them")
    matches = store.find(ref, names)
    if not matches:
        if not JOB_ID.fullmatch(ref):
            raise JobNotFound(f"no job {ref!r}: `cvmjob ls` lists them")
        states = _remote_states()  # listed once: the lookup and, when it finds nothing, the error name them
        elsewhere = remote_job(ref, states)
        if elsewhere is None:
            looked = _remote_where(states)
            raise JobNotFound(f"no job {ref!r} in this store, nor in the state buckets {looked}: `cvmjob ls` lists "
                              f"this store's jobs; {REMOTE_HOW}")
        return elsewhere[0]
    if len(matches) > 1 and matches[0].job_id != ref and matches[0].name != ref:
        ids = ", ".join(j.job_id for j in matches[:5])
        raise JobNotFound(f"{ref!r} matches several jobs ({ids}); give more of the id")
    return matches[0]


def job_history(store: Store, job: JobRecord) -> tuple[list[NodeRecord], list[Event]]:
    """The job's nodes and events: from this store, or from its job.json when another machine's store holds it."""
    if store.get(job.job_id) is not None:
        return store.nodes(job.job_id), store.events(job.job_id)
    elsewhere = remote_job(job.job_id)
    return (elsewhere[1], elsewhere[2]) if elsewhere is not None else ([], [])


def _remote_states() -> list[ObjectStore]:
    """Where a job of another machine may be: CVMJOB_STATE_BUCKET of CVMJOB_REGION when set, else the default
    state bucket of every region that has one (GET Service names each bucket's region), CVMJOB_REGION's first."""
    home = resolve(os.environ.get("CVMJOB_REGION") or HOME_REGION)
    sdk = connect(home)
    if os.environ.get("CVMJOB_STATE_BUCKET"):
        return [ObjectStore(sdk, default_state_bucket(home))]
    found = retrying(lambda: buckets.regions(sdk))
    ours = sorted((region != home.region, region) for name, region in found.items()
                  if name == region_state_bucket(region, home.appid))
    return [ObjectStore(sdk if region == home.region else connect(resolve(region, home.embedded)),
                        region_state_bucket(region, home.appid)) for _, region in ours]


def _remote_where(states: list[ObjectStore]) -> str:
    return ", ".join(f"{state.bucket} ({state.sdk.region})" for state in states) or "(none: no region has one)"


def remote_job(job_id: str, states: list[ObjectStore] | None = None
               ) -> tuple[JobRecord, list[NodeRecord], list[Event]] | None:
    """The job as its controller last published it (jobdoc), or None when no state bucket (``states``: default,
    every region's, _remote_states) has such a job."""
    for state in states if states is not None else _remote_states():
        try:
            found = retrying(partial(jobdoc.fetch, state, job_id)) if state.bucket_exists() else None
        except ValueError as exc:
            raise JobNotFound(f"{job_id}: its job.json in {state.bucket} cannot be read: {exc}") from exc
        if found is not None:
            return found
    return None


def doctor(region: str, force_emulator: bool = False) -> list[Check]:
    """`cvmjob doctor`: whether this machine's keys could run a job in ``region`` (target/doctor.py)."""
    target = resolve(region, force_emulator)
    return run_checks(target, connect(target), default_state_bucket(target))


def release_embedded(store: Store) -> None:
    """Stop the embedded emulator when no active job runs on it ("for the job's duration")."""
    current = embedded.running()
    if current is None:
        return
    for job in store.list_jobs(active_only=True):
        if job.target.embedded:
            return
    embedded.stop(current)


@dataclass(frozen=True)
class AgentView:
    status: Status | None
    result: Result | None
    manifest: Manifest | None
    # agent_view(every_node=True): each node's last status of the attempt, by node (those not written yet left out).
    heartbeats: dict[int, Status] = field(default_factory=dict)


def state_store(job: JobRecord) -> ObjectStore:
    """The job's state bucket, where the agents write. The embedded emulator is started again if a finished job
    left it stopped: its COS keeps the reports, the manifest and the logs."""
    return ObjectStore(connect(reconnect(job.target)), job.plan.state_bucket)


def agent_view(job: JobRecord, node: int = 0, every_node: bool = False) -> AgentView:
    """What the agents last said, read from COS (None fields when unreachable or not yet written). With
    ``every_node`` the other nodes' statuses too (`status` and the summary show each node's GPU use); a sweep,
    which reads node 0's every few seconds, does without them."""
    store = state_store(job)
    layout = JobLayout(job.job_id)
    try:
        beats = _statuses(store, layout, job.attempt, range(job.plan.nnodes) if every_node
                          else (node,))
        result = read_node_doc(store, layout.result(job.attempt, node), Result, job.attempt, node, None)
        manifest = checkpoint_manifest(job, store.sdk)
    except CloudError:
        return AgentView(None, None, None)
    return AgentView(
        beats.get(node),
        result if isinstance(result, Result) else None,
        manifest,
        beats if every_node else {},
    )


def run_facts_of(store: Store, job: JobRecord, view: AgentView | None = None, up_to_date: bool = False,
                 now: Callable[[], float] = time.time) -> RunFacts:
    """The job as a CI summary tells it. ``view``: what the agents said, when the caller has read it already (the
    end of a run has)."""
    view = view or agent_view(job)
    metrics = view.result.metrics if view.result is not None else {}
    facts = run_facts(job, job_history(store, job)[1], metrics, now())
    return facts.model_copy(update={"up_to_date": up_to_date})


def notify_gate_missed(store: Store, job: JobRecord, missed: Sequence[str], now: Callable[[], float] = time.time
                       ) -> None:
    """The job's gate_missed event (``missed``: each gate's line), recorded and then sent from this process: a CI
    runner is gone before any controller's next pass (what is not sent within deliver.FLUSH_SECONDS waits for the
    next controller of this store). Once per attempt, whichever runner tells it. Only this job's: another job's
    webhook variable is not this runner's to have, and a try without it would count against that notification."""
    notices = for_gate(job, missed, now())
    if notices:
        outbox = Outbox(store)
        outbox.add(notices, now())
        Deliverer(outbox, controller_name(), now=now, subjects=[job.job_id]).flush()


def baseline_for(store: Store, job: JobRecord, named: str | None,
                 env: Mapping[str, str] = os.environ) -> RunFacts | None:
    """What a CI summary compares ``job`` with: the job ``named``, else the newest success of its name on the
    default branch (``_latest/`` in its state bucket), unless that is the job itself."""
    if named is not None:
        return run_facts_of(store, find_job(store, named))
    try:
        found = state_store(job).get_json(latest_key(job.name, default_branch(env)))
    except CloudError:
        return None
    latest = None if found is None else RunFacts.model_validate(found)
    return None if latest is None or latest.job_id == job.job_id else latest


def pool_access(region: str, force_emulator: bool = False) -> tuple[PoolStore, TencentSdk]:
    """The reserved pools' records and the cloud of ``region``: the cloud first, so that a refused target (CI
    without keys) leaves no store behind."""
    sdk = connect(resolve(region, force_emulator))
    return PoolStore(Store(store_url())), sdk


def checkpoint_manifest(job: JobRecord, sdk: TencentSdk) -> Manifest | None:
    """The job's checkpoint manifest where its agents commit it (agent/manifest.py reads it for both, passing over
    what is not a manifest: the training's keys can write there too); None while there is none."""
    where = job_checkpoints(job)
    try:
        read = read_manifest(ObjectStore(sdk.for_region(job.plan.bucket_regions.get(where.bucket, sdk.region)),
                                         where.bucket), where.prefix)
    except NotFoundError:  # the bucket is gone (a checkpoints.upload_to deleted since): nothing to resume from
        return None
    return read.manifest if read.generation or read.manifest.checkpoints else None


def heartbeats(job: JobRecord, nodes: Iterable[int], attempt: int | None = None) -> dict[int, Status]:
    """The nodes' last statuses of the attempt (default: the current one); {} while COS cannot be read."""
    try:
        return _statuses(state_store(job), JobLayout(job.job_id), attempt or job.attempt, nodes)
    except CloudError:
        return {}


def _statuses(store: ObjectStore, layout: JobLayout, attempt: int, nodes: Iterable[int]) -> dict[int, Status]:
    """The nodes' statuses that are theirs: one that is not (garbage the training wrote, another attempt's) is left
    out, as one not written yet is. Their instances are not known here: the controller checks those."""
    docs = {node: read_node_doc(store, layout.status(attempt, node), Status, attempt, node, None) for node in nodes}
    return {node: doc for node, doc in docs.items() if isinstance(doc, Status)}


def log_chunks(job: JobRecord, attempt: int | None = None, node: int = 0, after: str = "") -> Iterator[tuple[str, str]]:
    """(key, text) of the shipped log chunks of an attempt, in order, after the key ``after``."""
    store = state_store(job)
    layout = JobLayout(job.job_id)
    prefix = layout.logs_prefix(attempt or job.attempt, node)
    for info in store.iter_objects(prefix):
        if info.key > after:
            data = store.get_bytes(info.key) or b""
            yield info.key, data.decode(errors="replace")


def follow_logs(store: Store, job: JobRecord, attempt: int | None = None, node: int = 0,
                follow: bool = False, each_look: Callable[[JobRecord], None] | None = None) -> Iterator[str]:
    """The log's text, chunk by chunk; with ``follow``, new chunks as they are shipped until the job ends, and
    ``each_look`` given the job at every look for them (`logs -f` watches the node's GPUs meanwhile)."""
    last = ""
    while True:
        for key, text in log_chunks(job, attempt, node, after=last):
            yield text
            last = key
        job = find_job(store, job.job_id)
        if not follow or job.state.is_terminal():
            return
        if each_look is not None:
            each_look(job)
        time.sleep(POLL_SECONDS)


def cancel(store: Store, job: JobRecord, now: Callable[[], float] = time.time, checkpoint: bool = True) -> None:
    """Ask the job's controller to cancel it: the agents checkpoint and upload first, unless ``checkpoint`` is
    off (nothing will resume it: its instances go within seconds). A job this store does not hold is asked through
    a signal in its state bucket, which the controller driving it reads every round."""
    if job.state.is_terminal():
        return
    if store.get(job.job_id) is None:
        retrying(lambda: state_store(job).put_json(JobLayout(job.job_id).cancel_signal(checkpoint),
                                                    {"time": now(), "checkpoint": checkpoint}))
        return
    store.request_cancel(job.job_id, now(), checkpoint)


def wait(store: Store, job: JobRecord) -> JobRecord:
    """The job once it has ended."""
    while not job.state.is_terminal():
        time.sleep(POLL_SECONDS)
        job = find_job(store, job.job_id)
    return job


def hand_to_controller(store: Store, lease_seconds: float) -> str:
    """Who will drive the submitted jobs: a live controller of this store claims them; when none is alive, one is
    started in the background, to exit once it has nothing left to drive."""
    live = store.live_controllers(time.time(), lease_seconds)
    if live:
        return f"controller {live[0].owner}"
    log = in_background(["controller", "--exit-when-idle"], "controller")
    return f"a controller started in the background (its log: {log})"


def spawn_driver(job_id: str) -> Path:
    """A process of its own driving the job (`resume --detach`: it may take over a lease a controller would wait
    out); returns its log."""
    return in_background(["_drive", job_id], job_id)


def private_log(log_name: str) -> Path:
    """``$CVMJOB_HOME/logs/<log_name>.log``, made its owner's only if new: a controller's log holds the trainings'
    output, like the store their specs."""
    log = state_db().parent / "logs" / f"{log_name}.log"
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
    return log


def in_background(command: list[str], log_name: str) -> Path:
    """``cvmjob <command>`` in a session of its own, its output appended to the log it returns."""
    log = private_log(log_name)
    with log.open("ab") as out:
        subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli.main", *command],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return log


@dataclass(frozen=True)
class Orphans:
    instances: list[compute.InstanceView]
    images: list[images.ImageView]


class GcIncomplete(CvmjobError):
    """An orphan instance stayed in a state TerminateInstances refuses for as long as gc waits."""

    exit_code = EXIT_CLOUD_ERROR


class Missing(Enum):
    """A job no store of ours knows, and whose document gc did not find."""

    ABSENT = "absent"  # no job.json in any bucket of the region: every bucket was read
    UNREADABLE = "unreadable"  # a bucket could not be read, or its job.json not by this release


def orphaned(job: JobRecord | Missing, in_store: bool, tags: dict[str, str], created: float | None, now: float,
             grace: float, me: str, holder_died: Callable[[str], bool]) -> bool:
    """Whether a tagged resource of ``job`` is garbage: provably finished or abandoned, never merely unknown.

    - A job of this store (``in_store``): once terminal.
    - Otherwise, only what carries this owner's tag (``me``), judged by the job's document (job.json, which its
      controller puts in its state bucket from its submission on, state/jobdoc.py):
      terminal there: at once; not terminal, its lease held by a controller of this home whose process is gone
      (``holder_died``: this store lost the job): once older than ``grace``; not terminal otherwise (another home, a
      CI runner, a host of the same name drives it, or will): never, its own controller or its ActionTimer ends it.
    - No document in any bucket of the region (a job of an older release; a state bucket deleted): once older than
      ``grace``. A bucket that could not be read, or a document this release cannot read: never (unknown is not
      gone)."""
    if in_store:
        assert isinstance(job, JobRecord)
        return job.state.is_terminal()
    if tags.get(TAG_OWNER) != me or job is Missing.UNREADABLE:
        return False
    if isinstance(job, JobRecord) and job.state.is_terminal():
        return True
    old = created is not None and now - created >= grace
    if job is Missing.ABSENT:
        return old
    assert isinstance(job, JobRecord)
    return old and job.lease_owner is not None and holder_died(job.lease_owner)


def _documents(sdk: TencentSdk, job_ids: set[str], first: str | None) -> dict[str, JobRecord | Missing]:
    """Each job as its document in the region's buckets has it (``first`` looked in first: the default state
    bucket), or why there is none."""
    if not job_ids:
        return {}
    try:
        names = retrying(lambda: buckets.in_region(sdk))
    except CloudError:
        return dict.fromkeys(job_ids, Missing.UNREADABLE)
    states = [ObjectStore(sdk, name) for name in sorted(names, key=lambda name: name != first)]
    return {job_id: _document(states, job_id) for job_id in job_ids}


def _document(states: list[ObjectStore], job_id: str) -> JobRecord | Missing:
    unread = False
    for state in states:
        try:
            found = retrying(partial(jobdoc.fetch, state, job_id))
        except (CloudError, ValueError):  # the bucket refused us; a document not JSON, or of a newer release
            unread = True
            continue
        if found is not None:
            return found[0]
    return Missing.UNREADABLE if unread else Missing.ABSENT


def find_orphans(store: Store, sdk: TencentSdk, now: float, grace: float, me: str,
                 first_bucket: str | None = None) -> Orphans:
    """Instances and images tagged by cvmjob that no active job owns (``orphaned`` says which, and why an owner
    unknown to this store is not an owner gone). A succeeded job's own image is its product, not an orphan,
    whichever store holds the job."""
    local = {j.job_id: j for j in store.list_jobs()}
    tagged_instances = [i for i in compute.find_by_tag_key(sdk, TAG_JOB) if not i.state.leaving]
    tagged_images = images.find_by_tag_key(sdk, TAG_JOB)
    tag_sets = [*(i.tags for i in tagged_instances), *(i.tags for i in tagged_images)]
    unknown = {tags.get(TAG_JOB, "") for tags in tag_sets if tags.get(TAG_OWNER) == me} - set(local)
    jobs: dict[str, JobRecord | Missing] = {**_documents(sdk, unknown, first_bucket), **local}

    def garbage(tags: dict[str, str], created: float | None) -> bool:
        job_id = tags.get(TAG_JOB, "")
        job = jobs.get(job_id, Missing.UNREADABLE)  # another owner's: not looked up, not ours to judge
        return orphaned(job, job_id in local, tags, created, now, grace, me, died_here)

    instances = [i for i in tagged_instances if garbage(i.tags, i.created_at.timestamp() if i.created_at else None)]
    products = {j.image_id for j in jobs.values()
                if isinstance(j, JobRecord) and j.state == JobState.SUCCEEDED and j.image_id}
    stray_images = []
    for img in tagged_images:
        created = img.created()
        # A failed capture is garbage whoever made it (even a succeeded job's); a CREATING one cannot be deleted yet.
        if (img.image_id in products and img.state.ready) or not (img.state.ready or img.state.failed):
            continue
        if garbage(img.tags, created.replace(tzinfo=timezone.utc).timestamp() if created else None):
            stray_images.append(img)
    return Orphans(instances, stray_images)


def collect_orphans(sdk: TencentSdk, orphans: Orphans, wait_seconds: float = Settings.pending_timeout,
                    sleep: Callable[[float], object] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
    """Delete the images, terminate the instances. An instance in a state TerminateInstances refuses (PENDING,
    STARTING, …) is looked at again every POLL_SECONDS until it takes it, for at most ``wait_seconds`` (as long as
    a controller waits for a launch stuck in PENDING), as a job's teardown does; the others go meanwhile.
    GcIncomplete names those still refused then, everything else collected."""
    if orphans.images:
        retrying(lambda: images.delete(sdk, [i.image_id for i in orphans.images]))
    states = {i.instance_id: i.state for i in orphans.instances}
    deadline = clock() + wait_seconds
    while states:
        ready = [i for i, state in states.items() if state.terminable]
        try:
            if ready:
                retrying(partial(compute.terminate, sdk, ready))
            states = {i: state for i, state in states.items() if i not in ready}
        except StateConflictError:
            pass  # one entered such a state since the look (the others were taken): the next look says which
        if not states:
            return
        if clock() >= deadline:
            left = ", ".join(f"{i} ({state.value})" for i, state in sorted(states.items()))
            raise GcIncomplete(f"gc: {left} still in a state TerminateInstances refuses after {wait_seconds:.0f} s; "
                               "everything else was collected. run `cvmjob gc` again once it has left it")
        sleep(POLL_SECONDS)
        seen = retrying(partial(compute.describe, sdk, list(states)))
        states = {i: seen[i].state for i in states if i in seen and not seen[i].state.leaving}


def gc(store: Store, region: str, force_emulator: bool, grace: float, dry_run: bool) -> Orphans:
    """The region's orphans (find_orphans), cleaned unless ``dry_run``."""
    target = resolve(region, force_emulator)
    sdk = connect(target)
    orphans = find_orphans(store, sdk, time.time(), grace, owner(), default_state_bucket(target))
    if not dry_run:
        collect_orphans(sdk, orphans)
    return orphans
