"""The provider's exception tree. SDK errors are translated once, in ``_sdk``, and keep their cause.

The split that matters to callers: ``TransientError`` is worth retrying as is; ``CapacityError`` is worth
retrying elsewhere (another zone, type or charge type); everything else is permanent for this request.
``AuthError`` in particular never means that a resource is gone.
"""

from __future__ import annotations

from ...errors import EXIT_CLOUD_ERROR, CvmjobError


class CloudError(CvmjobError):
    """The cloud refused: a user who meets one outside a job (a plan, gc) gets it as one line, exit 3."""

    exit_code = EXIT_CLOUD_ERROR

    def __init__(self, code: str, message: str, request_id: str | None = None) -> None:
        super().__init__(f"{code}: {message}" + (f" (request {request_id})" if request_id else ""))
        self.code = code
        self.message = message
        self.request_id = request_id

    def hint(self) -> str:
        return f"the cloud refused: {self}"


class CredentialConfigError(CvmjobError):
    """The keys' configuration is half given (a role without a token, a token file that is not there): it names
    the variable to set, and no other source is tried in its place."""

    exit_code = EXIT_CLOUD_ERROR


class TransientError(CloudError):
    """Throttling, network failures, 5xx and internal errors: the same call may succeed later."""


class CapacityError(CloudError):
    """Out of stock, sold out, spot quota or price: the same placement will not do now."""


class QuotaError(CloudError):
    """An account quota or balance limit: no retry helps until the user acts."""


class AuthError(CloudError):
    """Bad, expired or insufficient credentials."""


class ExpiredCredentialError(AuthError):
    """Temporary keys past their expiry: their successor may already be there, so the call may succeed again
    with the keys read afresh."""


class NotFoundError(CloudError):
    """The cloud answered that the resource does not exist."""


class AlreadyExistsError(CloudError):
    """A create-only write met an object that exists (COS: ``x-cos-forbid-overwrite``): another writer came
    first. Never retried as it is: the caller reads what the other wrote and decides again."""


class StateConflictError(CloudError):
    """The resource exists but its state forbids the operation (e.g. terminating a PENDING instance)."""


class InvalidRequestError(CloudError):
    """The request itself is wrong: parameters, unsupported combinations."""
