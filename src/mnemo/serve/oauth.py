"""OAuth 2.1 resource-server mode: JWT bearer tokens from one configured issuer.

Remote connectors (Claude.ai- or ChatGPT-style) sign their users in with an authorization server
and send its access tokens as ``Authorization: Bearer``. mnemo verifies each token's signature
against the issuer's JWKS (fetched from ``MNEMO_OAUTH_JWKS_URL``, cached, refreshed when a token
names a key it does not know), its issuer, audience (``MNEMO_OAUTH_AUDIENCE``, default the public
URL) and expiry, and takes the user from one claim (``MNEMO_OAUTH_USER_CLAIM``, default ``sub``)
and the role from another when set (``MNEMO_OAUTH_ROLE_CLAIM``; ``member`` otherwise). It
publishes RFC 9728 protected-resource metadata so a client finds the issuer from a 401.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import jwt

from mnemo.access.caller import Caller, Role

log = logging.getLogger("mnemo.http")

ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "PS256"]  # asymmetric only: no shared secrets
METADATA_PATH = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    issuer: str
    jwks_url: str
    resource: str  # this server's public MCP URL, e.g. https://mnemo.example.com/mcp
    audience: str
    user_claim: str = "sub"
    role_claim: str | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        """RFC 9728: where this resource's tokens come from."""
        return {
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "mnemo",
        }

    @property
    def metadata_url(self) -> str:
        """RFC 9728's well-known URL for this resource: the path of the resource after the well-known part."""
        parts = urlsplit(self.resource)
        return f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{parts.path.rstrip('/')}"


class JwtVerifier:
    def __init__(self, settings: OAuthSettings) -> None:
        self.settings = settings
        self._keys = jwt.PyJWKClient(settings.jwks_url, cache_keys=True, timeout=10)

    def verify(self, token: str) -> Caller | None:
        """The token's caller, or None for any token that is not valid here (blocking: fetches keys)."""
        try:
            key = self._keys.get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=ALGORITHMS,
                audience=self.settings.audience,
                issuer=self.settings.issuer,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as refused:
            log.info("bearer token refused: %s", refused)
            return None
        user = claims.get(self.settings.user_claim)
        if not isinstance(user, str) or not user.strip() or len(user) > 256:
            log.info("bearer token refused: no usable %r claim", self.settings.user_claim)
            return None
        role = claims.get(self.settings.role_claim) if self.settings.role_claim else None
        return Caller(user, Role(role) if isinstance(role, str) and role in Role.__members__.values() else Role.MEMBER)
