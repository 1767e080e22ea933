"""What CAM holds for AssumeRoleWithWebIdentity: OIDC identity providers, and the roles that trust their tokens.

A CAM OIDC provider is a static copy of the IdP's JWKS (CAM never fetches ``jwks_uri``), the issuer URL
(``IdentityUrl``) and the client ids that a token's ``aud`` must name (CreateOIDCConfig,
https://tencentcloud.com/document/api/598/47115; the aud check: https://cloud.tencent.com/document/product/598/96013).
A role trusts a provider's tokens through its condition on ``oidc:iss``, which CAM requires, and here optionally on
``oidc:sub`` (a GitHub role names the repository and ref it serves). What the role's keys may do is its policy.
"""

from __future__ import annotations

import fnmatch
from typing import Any

import jwt
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import ApiError
from ..iam import Policy

# How far ahead of the emulator an IdP's clock may run: a token is not refused as "issued in the future" for that.
CLOCK_SKEW_SECONDS = 60.0


def _bad_token(message: str) -> ApiError:
    return ApiError("InvalidParameter.WebIdentityTokenError", message)


class OidcProvider(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    provider_id: str = Field(min_length=1)
    issuer: str = Field(min_length=1)
    client_ids: tuple[str, ...] = Field(min_length=1)
    jwks: dict[str, Any]

    @field_validator("jwks")
    @classmethod
    def _usable(cls, jwks: dict[str, Any]) -> dict[str, Any]:
        try:
            jwt.PyJWKSet.from_dict(jwks)
        except jwt.PyJWTError as exc:  # pydantic reports only ValueErrors as a field's error
            raise ValueError(f"not a usable JWKS: {exc}") from exc
        return jwks

    def signing_key(self, kid: str | None) -> jwt.PyJWK:
        keys = jwt.PyJWKSet.from_dict(self.jwks).keys
        if kid is None and len(keys) == 1:  # a token without a kid can only mean the provider's one key
            return keys[0]
        for key in keys:
            if kid is not None and key.key_id == kid:
                return key
        raise _bad_token(f"The provider {self.provider_id} has no key {kid!r} to verify the token.")


class OidcRole(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[\w+=,.@-]{1,128}$")
    policy: dict[str, Any]
    issuer: str = Field(min_length=1)
    subject: str | None = None  # a string_like pattern, e.g. "repo:org/repo:ref:refs/heads/main"

    @field_validator("policy")
    @classmethod
    def _parses(cls, policy: dict[str, Any]) -> dict[str, Any]:
        Policy.parse(policy)
        return policy

    def trusts(self, claims: dict[str, Any]) -> bool:
        if claims.get("iss") != self.issuer:
            return False
        return self.subject is None or fnmatch.fnmatchcase(str(claims.get("sub", "")), self.subject)


class WebIdentity:
    """The account's OIDC providers and roles, set up through the admin API (as CreateOIDCConfig and CreateRole
    would), and the verification of a token against them."""

    def __init__(self) -> None:
        self.providers: dict[str, OidcProvider] = {}
        self.roles: dict[str, OidcRole] = {}

    def add_provider(self, body: dict[str, Any]) -> OidcProvider:
        provider = OidcProvider.model_validate(body)
        self.providers[provider.provider_id] = provider  # a second call replaces it, as UpdateOIDCConfig does
        return provider

    def add_role(self, body: dict[str, Any]) -> OidcRole:
        role = OidcRole.model_validate(body)
        self.roles[role.name] = role
        return role

    def role(self, name: str, uin: str) -> OidcRole:
        role = self.roles.get(name)
        if role is None:
            # The action's documented codes have only InternalError.GetRoleError for this, which a client reads as a
            # passing fault; AssumeRole's RoleNotFound (STS errorcodes.py) says what is wrong.
            raise ApiError("ResourceNotFound.RoleNotFound", f"No role {name} in account {uin}.")
        return role

    def verify(self, provider_id: str, token: str, now: float) -> dict[str, Any]:
        """The token's claims once its signature, issuer, audience and times hold; the cloud clock judges the
        times (PyJWT would use the wall clock, which an advanced emulator has left behind)."""
        provider = self.providers.get(provider_id)
        if provider is None:
            # No code of the action names a missing provider; ParamError (documented for it) is the parameter's.
            raise ApiError("InvalidParameter.ParamError", f"No OIDC identity provider {provider_id!r} in this account.")
        try:
            key = provider.signing_key(jwt.get_unverified_header(token).get("kid"))
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                audience=provider.client_ids,
                issuer=provider.issuer,
                options={"require": ["iss", "aud", "exp", "iat"], "verify_exp": False, "verify_nbf": False,
                         "verify_iat": False},
            )
        except jwt.PyJWTError as exc:
            raise _bad_token(f"The WebIdentityToken is not valid: {exc}.") from None
        times = {name: claims[name] for name in ("exp", "iat", "nbf") if name in claims}
        if not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in times.values()):
            raise _bad_token("The WebIdentityToken's exp, iat and nbf must be numbers.")
        if times["exp"] <= now:
            raise _bad_token(f"The WebIdentityToken expired {now - times['exp']:.0f} s ago.")
        if max(times["iat"], times.get("nbf", 0)) > now + CLOCK_SKEW_SECONDS:
            raise _bad_token("The WebIdentityToken is not valid yet (iat or nbf is in the future).")
        return claims

    def to_state(self) -> dict[str, Any]:
        return {
            "providers": [p.model_dump(mode="json") for p in self.providers.values()],
            "roles": [r.model_dump(mode="json") for r in self.roles.values()],
        }

    def restore(self, state: dict[str, Any]) -> None:
        for provider in state.get("providers", []):
            self.add_provider(provider)
        for role in state.get("roles", []):
            self.add_role(role)
