"""Every COS error the emulator can answer is one real COS answers, with the same HTTP status."""

from __future__ import annotations

import ast
from pathlib import Path

import orchestrator.emulator.cos as cos_package

# shared/reference/tencent-cloud-api.md §6.4 "Error XML and codes" (doc 436/7730; NoSuchKey is marked [INF] there).
COS_ERROR_CODES: dict[str, int] = {
    "AccessDenied": 403,
    "SignatureDoesNotMatch": 403,
    "RequestTimeTooSkewed": 403,
    "InvalidAccessKeyId": 403,
    "ExpiredToken": 403,
    "AccountProblem": 403,
    "NoSuchBucket": 404,
    "NoSuchUpload": 404,
    "NoSuchKey": 404,
    "InvalidArgument": 400,
    "InvalidBucketName": 400,
    "EntityTooSmall": 400,
    "EntityTooLarge": 400,
    "InvalidPart": 400,
    "InvalidPartOrder": 400,
    "MalformedXML": 400,
    "BadDigest": 400,
    "InvalidDigest": 400,
    "KeyTooLong": 400,
    "MissingContentMD5": 400,
    "RequestTimeOut": 400,
    "TooManyBucket": 400,
    "MethodNotAllowed": 405,
    "BucketAlreadyExists": 409,
    "BucketNotEmpty": 409,
    "FileAlreadyExists": 409,  # PUT Object / Complete Multipart Upload with x-cos-forbid-overwrite (doc 436/7749)
    "InvalidBucketState": 409,
    "OperationAborted": 409,
    "MissingContentLength": 411,
    "PreconditionFailed": 412,
    "InvalidRange": 416,
    "InternalError": 500,
    "NotImplemented": 501,
    "ServiceUnavailable": 503,
    "SlowDown": 503,
}


def emitted_errors() -> set[tuple[int, str, str]]:
    """(status, code, where) for every ``CosError(<status>, "<Code>", ...)`` in the COS package's source."""
    found = set()
    for path in Path(cos_package.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (
                isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "CosError"
            ):
                continue
            status, code = node.args[0], node.args[1]
            if isinstance(code, ast.Constant) and isinstance(code.value, str):
                where = f"{path.name}:{node.lineno}"
                assert isinstance(status, ast.Constant) and isinstance(status.value, int), f"{where}: computed status"
                found.add((status.value, code.value, where))
    return found


def test_every_emitted_code_is_a_real_cos_code() -> None:
    emitted = emitted_errors()
    assert len(emitted) > 20  # the scan found the package's errors
    wrong = [(where, status, code) for status, code, where in emitted if COS_ERROR_CODES.get(code) != status]
    assert not wrong, f"codes or statuses COS does not answer: {wrong}"
