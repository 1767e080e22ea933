"""CVM 2017-03-12 actions: parse the request, call the model, render the answer (../views.py).

One module per resource family, as moto's ``ec2/responses/``: instances, images, the offering (prices, zones,
instance types), the account's quotas, HPC clusters and action timers, each a set of plain functions
``(cvm, ctx, params) -> response``, collected in ``ACTIONS``. Every request and response field is checked against
the SDK's models (tencentcloud/cvm/v20170312/models.py); the error codes are the per-API lists'
(shared/reference/tencent-cloud-api.md §1-§2) and errorcodes.py's. Instances, images, HPC clusters and timers are
regional: each call sees only those of its X-TC-Region.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ...api3.dispatch import Action, CallContext, Service
from ...api3.params import Params
from ..models import Cvm
from . import hpc, images, instances, offering, quota, timers

CvmHandler = Callable[[Cvm, CallContext, Params], dict[str, Any]]

ACTIONS: dict[str, CvmHandler] = {
    "RunInstances": instances.run_instances,
    "DescribeInstances": instances.describe_instances,
    "DescribeInstancesStatus": instances.describe_instances_status,
    "TerminateInstances": instances.terminate_instances,
    "StopInstances": instances.stop_instances,
    "StartInstances": instances.start_instances,
    "RebootInstances": instances.reboot_instances,
    "ResetInstance": instances.reset_instance,
    "CreateImage": images.create_image,
    "DescribeImages": images.describe_images,
    "DeleteImages": images.delete_images,
    "InquiryPriceRunInstances": offering.inquiry_price_run_instances,
    "DescribeZones": offering.describe_zones,
    "DescribeZoneInstanceConfigInfos": offering.describe_zone_instance_config_infos,
    "DescribeInstanceTypeConfigs": offering.describe_instance_type_configs,
    "DescribeAccountQuota": quota.describe_account_quota,
    "CreateHpcCluster": hpc.create_hpc_cluster,
    "DescribeHpcClusters": hpc.describe_hpc_clusters,
    "DeleteHpcClusters": hpc.delete_hpc_clusters,
    "ImportInstancesActionTimer": timers.import_instances_action_timer,
    "DescribeInstancesActionTimer": timers.describe_instances_action_timer,
    "DeleteInstancesActionTimer": timers.delete_instances_action_timer,
}
# By API 3.0's naming, Describe* and Inquiry* actions only read.
READ_ONLY_PREFIXES = ("Describe", "Inquiry")


def build(cvm: Cvm) -> Service:
    return Service(
        "cvm",
        "2017-03-12",
        {
            name: Action(functools.partial(handler, cvm), mutates=not name.startswith(READ_ONLY_PREFIXES))
            for name, handler in ACTIONS.items()
        },
    )
