"""Text fields with a required form. Each rejects bad input with the rule and an example, and gives editors
the same rule as a JSON-schema pattern."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Annotated, Any

from pydantic import AfterValidator, Field, GetCoreSchemaHandler, GetJsonSchemaHandler, WithJsonSchema
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from orchestrator.spec.cos import BUCKET_MAX_LENGTH, BUCKET_PATTERN, check_bucket
from orchestrator.spec.gpus import KNOWN_TYPE_NAMES
from orchestrator.spec.suggest import did_you_mean


@dataclass(frozen=True)
class Matches:
    """``Annotated[str, Matches(...)]``: the value must match ``pattern`` (anchored, ECMA-262 compatible)."""

    pattern: str
    rule: str  # the form in words, for the error message
    example: str

    def check(self, value: str) -> str:
        if re.fullmatch(self.pattern, value) is None:
            raise ValueError(f"{value!r} is not valid: {self.rule}, e.g. {self.example}")
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema["pattern"] = self.pattern
        json_schema.setdefault("examples", [self.example])
        return json_schema


_NAME = r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$"
JobName = Annotated[str, Matches(_NAME, "1-40 of a-z, 0-9 and '-', starting and ending with a letter or digit",
                                 "quickstart")]
Region = Annotated[str, Matches(r"^[a-z]{2}-[a-z]+(?:-[a-z]+)?$", "a Tencent Cloud region", "ap-guangzhou")]
Zone = Annotated[str, Matches(r"^[a-z]{2}-[a-z]+(?:-[a-z]+)?-[0-9]+$", "a zone: <region>-<number>",
                              "ap-guangzhou-3")]


@dataclass(frozen=True)
class MatchesTypeName(Matches):
    """An instance type name; a malformed one gets a suggestion from the GPU types this package knows."""

    def check(self, value: str) -> str:
        try:
            return super().check(value)
        except ValueError as exc:
            hint = did_you_mean(value, KNOWN_TYPE_NAMES)
            raise ValueError(f"{exc}. {hint}" if hint else str(exc)) from None


# FAMILY.SIZE; families mix cases (GN10Xp, HCCPNV4h), sizes are upper case (2XLARGE32, MEDIUM4).
InstanceTypeName = Annotated[str, MatchesTypeName(
    r"^[A-Z][A-Za-z0-9]*\.[0-9]*[A-Z]+[0-9]+$", "an instance type FAMILY.SIZE (case-sensitive)", "GN7.2XLARGE32",
)]
DriverVersion = Annotated[str, Matches(r"^\d+(\.\d+){1,2}$", "numbers joined by dots", "535.161.07")]
ImageId = Annotated[str, Matches(r"^img-[a-z0-9]{8}$", "img- and 8 lowercase letters or digits", "img-487zeit5")]
VpcId = Annotated[str, Matches(r"^vpc-[a-z0-9]{8}$", "vpc- and 8 lowercase letters or digits", "vpc-2ari9m7h")]
SubnetId = Annotated[str, Matches(r"^subnet-[a-z0-9]{8}$", "subnet- and 8 lowercase letters or digits",
                                  "subnet-ht9h8jdo")]
SecurityGroupId = Annotated[str, Matches(r"^sg-[a-z0-9]{8}$", "sg- and 8 lowercase letters or digits", "sg-5u8bpno4")]
HpcClusterId = Annotated[str, Matches(r"^hpc-[a-z0-9]{8}$", "hpc- and 8 lowercase letters or digits",
                                      "hpc-n1i6ehfo")]
ImageName = Annotated[str, Matches(r"^\S(?:.{0,58}\S)?$", "1-60 characters, not starting or ending with a space",
                                   "Ubuntu Server 22.04 LTS 64bit")]
PoolName = Annotated[str, Matches(r"^[a-z0-9][a-z0-9-]{0,39}$", "1-40 of a-z, 0-9 and '-'", "default")]
Bucket = Annotated[str, AfterValidator(check_bucket), WithJsonSchema(
    {"type": "string", "pattern": BUCKET_PATTERN, "maxLength": BUCKET_MAX_LENGTH, "examples": ["cvmjob-1250000000"]}
)]
# "sts" or "role:<CamRoleName>" (CamRoleName characters from RunInstances' CamRoleNameMalformed rule).
Credentials = Annotated[str, Matches(r"^(?:sts|role:[A-Za-z0-9+=,.@_-]{1,128})$", "'sts' or 'role:<CamRoleName>'",
                                     "role:cvmjob-train")]
PolicyRef = Annotated[str, Matches(r"^(?:[a-z0-9][a-z0-9-]*|.+\.ya?ml)$",
                                   "a policy name (a-z, 0-9, '-') or a path to a .yaml file", "default")]


# A str field whose YAML value may be a number (read as text: `version: 2`), so editors do not flag it.
_TEXT_OR_NUMBER = {"type": ["string", "number"]}


def _no_nul(value: str) -> str:
    # Found here, not on a billed instance: no environment variable or command line can carry a NUL.
    if "\0" in value:
        raise ValueError("holds a NUL character (\\0), which no environment variable or command can carry. remove it")
    return value


EnvValue = Annotated[str, AfterValidator(_no_nul), WithJsonSchema(_TEXT_OR_NUMBER)]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("the command is empty. write a shell command, e.g. python train.py")
    return value


Command = Annotated[str, AfterValidator(_not_blank), AfterValidator(_no_nul),
                    WithJsonSchema({"type": "string", "pattern": r"\S"})]

# Tencent's tag rules (https://www.tencentcloud.com/document/product/651/13354): keys 1-127 and values 1-255
# characters, of letters of any script, digits, spaces (not at either end) and + - = . _ : / @ ( ) [ ] , ; > <, or
# in Chinese 【 】（ ）：; keys starting qcs:, project or 项目 are the cloud's own (other products reserve qcloud and
# tencent too). No JSON-schema pattern: ECMA-262 \w is ASCII-only and editors would reject Chinese tags, which are
# common.
_TAG_TEXT = re.compile(r"[\w +=.:/@()\[\],;<>【】（）：-]+")
_RESERVED_TAG_PREFIXES = ("qcs:", "qcloud", "tencent", "project", "项目")
_CVMJOB_TAG_PREFIX = "cvmjob:"


def _tag_text(value: str) -> str:
    if _TAG_TEXT.fullmatch(value) is None:
        raise ValueError(f"{value!r} may only contain letters, digits, spaces and + - = . _ : / @ ( ) [ ] , ; > <")
    if value != value.strip(" "):
        raise ValueError(f"{value!r} may not start or end with a space")
    return value


def _user_tag_key(key: str) -> str:
    lowered = key.lower()
    if lowered.startswith(_CVMJOB_TAG_PREFIX):
        raise ValueError(f"tag key {key!r} starts with {_CVMJOB_TAG_PREFIX!r}, which cvmjob reserves for its own tags")
    reserved = next((p for p in _RESERVED_TAG_PREFIXES if lowered.startswith(p)), None)
    if reserved is not None:
        raise ValueError(f"tag key {key!r} starts with {reserved!r}, which Tencent Cloud reserves")
    return key


TagKey = Annotated[str, Field(min_length=1, max_length=127), AfterValidator(_tag_text), AfterValidator(_user_tag_key)]
TagValue = Annotated[str, Field(min_length=1, max_length=255), AfterValidator(_tag_text),
                     WithJsonSchema({**_TEXT_OR_NUMBER, "minLength": 1, "maxLength": 255})]


def _relative(value: str) -> str:
    if not value.strip():
        raise ValueError("the path is empty")
    path = PurePosixPath(value)
    if path.is_absolute() or "\\" in value:
        raise ValueError(f"{value!r} must be a relative path with '/' separators")
    return path.as_posix()


def _inside(value: str) -> str:
    if ".." in PurePosixPath(value).parts:
        raise ValueError(f"{value!r} may not contain '..': it must stay inside its directory")
    return value


LocalPath = Annotated[str, AfterValidator(_relative)]
"""A path on the machine running cvmjob, relative to the spec file's folder (so the spec works in any checkout)."""
InstancePath = Annotated[str, AfterValidator(_relative), AfterValidator(_inside)]
"""A path on the instance, inside the directory cvmjob gives it (no '..', not absolute)."""
