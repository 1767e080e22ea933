"""The emulated offering: regions, zones, instance types, prices, default stock and public images. CVM and VPC
both read it (VPC for the zones its default subnets are in); it imports nothing of theirs.

Families and shapes follow Tencent's GPU instance documentation (shared/reference/tencent-cloud-api.md §8),
including the trap that GN7.2XLARGE40 is half a T4 (a vGPU) while the full card is GN7.2XLARGE32.
PRICES ARE NOT REAL: they are plausible numbers for exercising cost logic; real prices come from
InquiryPriceRunInstances against Tencent Cloud.
"""

from __future__ import annotations

from dataclasses import dataclass

PRICE_REMARK = "emulator price: plausible, not a real Tencent Cloud quote"
CHARGE_TYPES = ("POSTPAID_BY_HOUR", "SPOTPAID", "PREPAID")


@dataclass(frozen=True)
class Zone:
    name: str
    zone_id: str
    region: str
    display_name: str


@dataclass(frozen=True)
class InstanceType:
    name: str
    family: str
    type_name: str
    cpu: int
    memory_gib: int
    gpu_model: str | None
    gpu_count: float  # < 1 for vGPU types
    gpu_memory_gib: float  # per card, as the guest sees it
    price_fen_per_hour: int  # pay-as-you-go list price
    local_nvme: tuple[int, int] | None = None  # (disks, GiB each) when the type carries local NVMe
    cpu_type: str = "Intel Xeon Platinum 8255C"
    bandwidth_gbps: float = 10.0
    spot_discount: float = 0.2  # spot pays this fraction of the pay-as-you-go price
    zones: tuple[str, ...] = ()

    @property
    def is_vgpu(self) -> bool:
        return 0 < self.gpu_count < 1

    @property
    def needs_hpc_cluster(self) -> bool:
        """The HCC (high-performance computing cluster) families are sold only into an HPC cluster of their zone
        (RunInstancesRequest.HpcClusterId: "若创建的实例为高性能计算实例，需指定实例放置的集群，否则不可指定")."""
        return self.family.startswith("HCC")

    @property
    def spot_price_fen_per_hour(self) -> int:
        return round(self.price_fen_per_hour * self.spot_discount)

    @property
    def monthly_price_fen(self) -> int:
        # Monthly subscriptions cost about 60 % of running pay-as-you-go for 720 hours.
        return round(self.price_fen_per_hour * 720 * 0.6)

    def price_fen_per_hour_for(self, charge_type: str) -> int:
        return self.spot_price_fen_per_hour if charge_type == "SPOTPAID" else self.price_fen_per_hour


ZONES: tuple[Zone, ...] = (
    Zone("ap-guangzhou-3", "100003", "ap-guangzhou", "广州三区"),
    Zone("ap-guangzhou-4", "100004", "ap-guangzhou", "广州四区"),
    Zone("ap-guangzhou-6", "100006", "ap-guangzhou", "广州六区"),
    Zone("ap-guangzhou-7", "100007", "ap-guangzhou", "广州七区"),
    Zone("ap-shanghai-4", "200004", "ap-shanghai", "上海四区"),
    Zone("ap-shanghai-5", "200005", "ap-shanghai", "上海五区"),
    Zone("ap-beijing-5", "800005", "ap-beijing", "北京五区"),
    Zone("ap-beijing-6", "800006", "ap-beijing", "北京六区"),
)
REGIONS: tuple[str, ...] = tuple(dict.fromkeys(z.region for z in ZONES))

_GZ = ("ap-guangzhou-3", "ap-guangzhou-4", "ap-guangzhou-6", "ap-guangzhou-7")
_ALL = tuple(z.name for z in ZONES)
_T4 = "NVIDIA T4"
_V100 = "NVIDIA V100"
_A100 = "NVIDIA A100"
_A10 = "NVIDIA A10"
_GN7_ZONES = ("ap-guangzhou-3", "ap-guangzhou-4", "ap-guangzhou-6", "ap-shanghai-4", "ap-beijing-5")
_GN10XP_ZONES = ("ap-guangzhou-3", "ap-guangzhou-4", "ap-shanghai-4", "ap-beijing-5")
_GT4_ZONES = ("ap-guangzhou-3", "ap-guangzhou-4", "ap-guangzhou-6", "ap-shanghai-4", "ap-shanghai-5",
              "ap-beijing-5", "ap-beijing-6")
_PNV4_ZONES = ("ap-guangzhou-7", "ap-shanghai-4", "ap-shanghai-5", "ap-beijing-6")
_EPYC_ROME = "AMD EPYC ROME 2.6GHz"
_EPYC_MILAN = "AMD EPYC Milan 2.55GHz"

INSTANCE_TYPES: tuple[InstanceType, ...] = (
    # Standard CPU types, for CPU jobs and control nodes.
    InstanceType("S5.MEDIUM4", "S5", "标准型S5", 2, 4, None, 0, 0, 32, zones=_ALL),
    InstanceType("S5.LARGE8", "S5", "标准型S5", 4, 8, None, 0, 0, 64, zones=_ALL),
    InstanceType("S5.2XLARGE16", "S5", "标准型S5", 8, 16, None, 0, 0, 128, zones=_ALL),
    # GN7: T4. LARGE20 and 2XLARGE40 are vGPU slices (GpuCount 0.25 / 0.5).
    InstanceType("GN7.LARGE20", "GN7", "GPU计算型GN7", 4, 20, _T4, 0.25, 4, 233, zones=_GN7_ZONES),
    InstanceType("GN7.2XLARGE40", "GN7", "GPU计算型GN7", 10, 40, _T4, 0.5, 8, 466, zones=_GN7_ZONES),
    InstanceType("GN7.2XLARGE32", "GN7", "GPU计算型GN7", 8, 32, _T4, 1, 16, 869, zones=_GN7_ZONES),
    InstanceType("GN7.5XLARGE80", "GN7", "GPU计算型GN7", 20, 80, _T4, 1, 16, 1106, zones=_GN7_ZONES),
    InstanceType("GN7.10XLARGE160", "GN7", "GPU计算型GN7", 40, 160, _T4, 2, 16, 2212, zones=_GN7_ZONES),
    InstanceType("GN7.20XLARGE320", "GN7", "GPU计算型GN7", 80, 320, _T4, 4, 16, 4424, zones=_GN7_ZONES),
    # GN10Xp: V100 NVLink 32 GB.
    InstanceType("GN10Xp.2XLARGE40", "GN10Xp", "GPU计算型GN10Xp", 10, 40, _V100, 1, 32, 2780, zones=_GN10XP_ZONES),
    InstanceType("GN10Xp.5XLARGE80", "GN10Xp", "GPU计算型GN10Xp", 20, 80, _V100, 2, 32, 5560, zones=_GN10XP_ZONES),
    InstanceType("GN10Xp.10XLARGE160", "GN10Xp", "GPU计算型GN10Xp", 40, 160, _V100, 4, 32, 11120,
                 zones=_GN10XP_ZONES),
    InstanceType("GN10Xp.20XLARGE320", "GN10Xp", "GPU计算型GN10Xp", 80, 320, _V100, 8, 32, 22240,
                 zones=_GN10XP_ZONES),
    # GT4: A100 NVLink 40 GB on AMD EPYC Rome.
    InstanceType("GT4.4XLARGE96", "GT4", "GPU计算型GT4", 16, 96, _A100, 1, 40, 3450, None,
                 _EPYC_ROME, 25, zones=_GT4_ZONES),
    InstanceType("GT4.8XLARGE192", "GT4", "GPU计算型GT4", 32, 192, _A100, 2, 40, 6900, None, _EPYC_ROME, 25,
                 zones=_GT4_ZONES),
    InstanceType("GT4.20XLARGE474", "GT4", "GPU计算型GT4", 82, 474, _A100, 4, 40, 13800, None, _EPYC_ROME, 50,
                 zones=_GT4_ZONES),
    InstanceType("GT4.41XLARGE948", "GT4", "GPU计算型GT4", 164, 948, _A100, 8, 40, 27600, None, _EPYC_ROME, 50,
                 zones=_GT4_ZONES),
    # PNV4: A10 24 GB on AMD EPYC Milan.
    InstanceType("PNV4.7XLARGE116", "PNV4", "GPU计算型PNV4", 28, 116, _A10, 1, 24, 1240, None, _EPYC_MILAN,
                 zones=_PNV4_ZONES),
    InstanceType("PNV4.14XLARGE232", "PNV4", "GPU计算型PNV4", 56, 232, _A10, 2, 24, 2480, None, _EPYC_MILAN,
                 zones=_PNV4_ZONES),
    InstanceType("PNV4.28XLARGE466", "PNV4", "GPU计算型PNV4", 112, 466, _A10, 4, 24, 4960, None, _EPYC_MILAN,
                 zones=_PNV4_ZONES),
    InstanceType("PNV4.56XLARGE932", "PNV4", "GPU计算型PNV4", 224, 932, _A10, 8, 24, 9920, None, _EPYC_MILAN,
                 zones=_PNV4_ZONES),
    # HCCPNV4h: 8x A100 with NVSwitch, bare metal with local NVMe (4 x 3.2 TB, third-party figure).
    InstanceType("HCCPNV4h.48XLARGE1024", "HCCPNV4h", "高性能计算集群HCCPNV4h", 192, 1024, _A100, 8, 40, 29800,
                 (4, 3200), "AMD EPYC 7K62", 200, zones=("ap-guangzhou-6", "ap-shanghai-5", "ap-beijing-6")),
)
INSTANCE_TYPES_BY_NAME = {t.name: t for t in INSTANCE_TYPES}
ZONES_BY_NAME = {z.name: z for z in ZONES}

# Stock per zone x type x charge type when nothing else is configured. GPU capacity is scarce; spot scarcer.
DEFAULT_STOCK = {"POSTPAID_BY_HOUR": 20, "PREPAID": 20, "SPOTPAID": 10}

# Public images, by their real ids (the same in every region; realcloud.md §3.1: a third-party image-build README
# verified in the console, img-eb30mz89 in Tencent's public image changelog).
PUBLIC_IMAGES: tuple[dict[str, str], ...] = (
    {"ImageId": "img-487zeit5", "ImageName": "Ubuntu Server 22.04 LTS 64bit", "OsName": "Ubuntu Server 22.04 LTS 64bit",
     "Platform": "Ubuntu"},
    {"ImageId": "img-mmytdhbn", "ImageName": "Ubuntu Server 24.04 LTS 64bit", "OsName": "Ubuntu Server 24.04 LTS 64bit",
     "Platform": "Ubuntu"},
    {"ImageId": "img-22trbn9x", "ImageName": "Ubuntu Server 20.04 LTS 64bit", "OsName": "Ubuntu Server 20.04 LTS 64bit",
     "Platform": "Ubuntu"},
    {"ImageId": "img-eb30mz89", "ImageName": "TencentOS Server 3.1 (TK4)", "OsName": "TencentOS Server 3.1 (TK4)",
     "Platform": "TencentOS"},
    {"ImageId": "img-9qrfy1xt", "ImageName": "TencentOS Server 4 for x86_64", "OsName": "TencentOS Server 4 for x86_64",
     "Platform": "TencentOS"},
)
# None carries the Tesla driver (realcloud.md §3.1): a GPU instance gets it from the auto-install (mirror.py).
DEFAULT_IMAGE_ID = "img-487zeit5"


def zones_of(region: str) -> list[Zone]:
    return [z for z in ZONES if z.region == region]
