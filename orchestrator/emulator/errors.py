"""Errors with the vendor's own codes. Every code raised here must exist in the SDK's errorcodes modules
(tests/emulator/test_error_codes.py checks each one found in this package's source)."""

from __future__ import annotations


class ApiError(Exception):
    """An API 3.0 error: answered as HTTP 200 with {"Response": {"Error": {Code, Message}, RequestId}}."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class CosError(Exception):
    """A COS XML error: answered with the HTTP status and <Error><Code/><Message/><Resource/><RequestId/>."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
