"""How ``mnemo serve --http`` listens; kept apart so the CLI builds it without loading the HTTP stack."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PORT = 8765


@dataclass(frozen=True, slots=True)
class HttpOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    stateless: bool = False  # 2025-era clients too without sessions: any server behind a load balancer answers
    allowed_hosts: tuple[str, ...] = ()  # Host header values accepted ("name:port" or "name:*")
