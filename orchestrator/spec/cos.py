"""COS locations written ``cos://<name>-<appid>/<prefix>``."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Annotated, Any

from pydantic import AfterValidator, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

COS_FORM = "cos://<name>-<appid>/<prefix>"
COS_EXAMPLE = "cos://datasets-1250000000/mnist/"
# Bucket names are lowercase letters, digits and '-', then '-' and the account's APPID (digits, 10 for accounts
# since 2017). At most 50 characters in all (shared/reference/tencent-cloud-api.md §6.1). Requiring 7+ digits
# catches a name that merely ends in a number ("data-2024") but lacks the APPID.
BUCKET_PATTERN = r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?-[0-9]{7,}$"
BUCKET_MAX_LENGTH = 50
_BUCKET_CHARS = re.compile(r"[a-z0-9-]+")
_HOW = f"expected {COS_FORM}, e.g. {COS_EXAMPLE}"


def check_bucket(name: str) -> str:
    """``name`` if it is a valid ``<name>-<appid>`` bucket; ValueError with the reason otherwise."""
    if not name:
        raise ValueError("the bucket is missing")
    if not _BUCKET_CHARS.fullmatch(name):
        raise ValueError(f"bucket {name!r} may only contain lowercase letters, digits and '-'")
    if not re.fullmatch(BUCKET_PATTERN, name):
        raise ValueError(f"bucket {name!r} does not end in -<appid>, your account's APPID "
                         f"(e.g. {name.strip('-')}-1250000000)")
    if len(name) > BUCKET_MAX_LENGTH:
        raise ValueError(f"bucket {name!r} is longer than {BUCKET_MAX_LENGTH} characters")
    return name


@dataclass(frozen=True)
class CosUri:
    """A bucket and a key prefix. ``str()`` gives back ``cos://bucket/prefix``."""

    bucket: str
    prefix: str = ""

    @classmethod
    def parse(cls, text: str) -> CosUri:
        """Parse ``cos://bucket-appid/prefix``; ValueError names what is wrong and shows the expected form."""
        if any(char.isspace() for char in text):
            raise ValueError(f"{text!r} contains whitespace; COS URIs cannot. {_HOW}")
        scheme, separator, rest = text.partition("://")
        if not separator:
            raise ValueError(f"{text!r} is not a COS URI. {_HOW}")
        if scheme != "cos":
            raise ValueError(f"{text!r} uses {scheme}://, but only COS is supported. {_HOW}")
        bucket, _, prefix = rest.partition("/")
        try:
            check_bucket(bucket)
        except ValueError as exc:
            raise ValueError(f"{exc}. {_HOW}") from None
        if "\\" in prefix or any(part in (".", "..") for part in prefix.split("/")):
            raise ValueError(f"prefix {prefix!r} may not contain '\\', '.' or '..' segments. {_HOW}")
        if "//" in prefix or prefix.startswith("/"):
            raise ValueError(f"prefix {prefix!r} has an empty segment ('//'). {_HOW}")
        return cls(bucket, prefix)

    def as_dir(self) -> CosUri:
        """The same place as a directory: the prefix ends with '/' (the bucket root stays "")."""
        if not self.prefix or self.prefix.endswith("/"):
            return self
        return replace(self, prefix=self.prefix + "/")

    def __str__(self) -> str:
        return f"cos://{self.bucket}/{self.prefix}"

    @classmethod
    def _validate(cls, value: object) -> CosUri:
        if isinstance(value, CosUri):
            return value
        if not isinstance(value, str):
            raise ValueError(f"expected a COS URI as text. {_HOW}")
        return cls.parse(value)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls._validate, serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="json")
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {
            "type": "string",
            "pattern": r"^cos://" + BUCKET_PATTERN[1:-1] + r"(/[^\s]*)?$",
            "examples": [COS_EXAMPLE],
        }


CosDir = Annotated[CosUri, AfterValidator(CosUri.as_dir)]
"""A COS prefix used as a directory (data sources, upload destinations): normalised to end with '/'."""
