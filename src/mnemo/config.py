"""Settings: environment variables with the prefix ``MNEMO_`` (or a ``.env`` file).

Everything mnemo writes lives under one data directory, ``MNEMO_HOME``: stores in
``stores/<name>/``, logs in ``logs/``, the store registry in ``stores.toml`` (unless
``MNEMO_CONFIG_DIR`` puts it elsewhere). One home is one world: another home sees none of its stores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from mnemo.engine import registry
from mnemo.errors import NotFound

PROFILE_NAMES = ("full", "agent", "memento", "stores", "shared")  # one per spec, in mnemo.profiles
Profile = Literal["full", "agent", "memento", "stores", "shared"]


def default_home() -> Path:
    return Path(platformdirs.user_data_dir("mnemo", appauthor=False))


def platform_config_dir() -> Path:
    """Where mnemo kept the store registry before it moved under MNEMO_HOME (shared by every home)."""
    return Path(platformdirs.user_config_dir("mnemo", appauthor=False))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MNEMO_", env_file=".env", extra="ignore")

    home: Path = Field(default_factory=default_home, description="Data directory for stores and logs.")
    config_dir: Path | None = Field(
        None, description="Folder of the store registry (stores.toml); unset: MNEMO_HOME itself."
    )
    store: str = Field("default", description="The store that servers and commands use.")
    profile: Profile = Field("full", description="The tool surface `mnemo serve` offers.")
    log_level: str = Field("INFO", description="Level of the log file and of stderr.")
    busy_timeout_s: float = Field(30.0, gt=0, description="How long a write waits for another writer.")
    database_url: str | None = Field(
        None,
        description="A PostgreSQL database (postgresql://user:password@host/db) holding the stores, each in a "
        "schema mnemo_<store>; unset: SQLite files under MNEMO_HOME.",
    )
    database_pool_size: int = Field(
        5, ge=1, le=1000, description="PostgreSQL: connections each server process keeps open at most."
    )
    database_wait_s: float = Field(
        120.0, ge=0, description="PostgreSQL: how long `mnemo serve` started before its database waits for it."
    )
    database_statement_timeout_s: float = Field(
        60.0,
        gt=0,
        le=86_400,
        description="PostgreSQL: longest one SQL statement of a call may run (statement_timeout) before the call "
        "fails with STATEMENT_TIMEOUT, retryable, its write rolled back; keep it above MNEMO_BUSY_TIMEOUT_S so that "
        "a wait for another writer is told as locked first. Schema migrations, reindex's deletion of the old "
        "vectors and the ANALYZE after a bulk write run without it.",
    )
    database_pool_timeout_s: float | None = Field(
        None,
        gt=0,
        le=3600,
        description="PostgreSQL: how long a call waits for a free pooled connection before it fails as locked; "
        "unset: MNEMO_BUSY_TIMEOUT_S.",
    )
    recency_half_life_days: float = Field(
        30.0, gt=0, description="Age at which a memory's recency score has fallen to 0.5."
    )
    max_memories: int | None = Field(
        None, ge=1, description="Quota of memories per store (active and archived); unlimited if unset."
    )
    embedder: Literal["local", "http", "none"] = Field(
        "local", description="What embeds memories: the bundled model, an HTTP endpoint, or nothing (words only)."
    )
    model: Literal["all-MiniLM-L6-v2", "all-mpnet-base-v2"] = Field(
        "all-MiniLM-L6-v2",
        description="The local model (embedder=local), installed by `mnemo setup --model NAME`; "
        "all-mpnet-base-v2 recalls better and costs about 5x the CPU per embedding. A store embedded "
        "by another model recalls by words only until `mnemo reindex`.",
    )
    vector_graph_from: int = Field(
        100_000,
        ge=1,
        description="Vectors from which recall searches a graph snapshot kept beside the store (SQLite) or in "
        "the server's home (PostgreSQL), with approximate candidates and an exact rerank, plus the newer vectors "
        "in memory, instead of all in memory.",
    )
    model_dir: Path | None = Field(
        None, description="Where `mnemo setup` puts the local model (default: the user cache dir, per model)."
    )
    model_variant: Literal["auto", "int8", "fp32"] = Field(
        "auto", description="Which build of the local model to run; auto prefers int8 when setup kept it."
    )
    embedding_url: str | None = Field(
        None, description="Base URL of an OpenAI-compatible embeddings API (for embedder=http)."
    )
    embedding_model: str | None = Field(None, description="Model name sent to that API (for embedder=http).")
    embedding_dimension: int | None = Field(
        None, ge=1, description="Length of that model's vectors (for embedder=http), e.g. 768 for nomic-embed-text."
    )
    embedding_api_key: str | None = Field(None, description="Bearer key for that API, if it needs one.")
    hooks_idle_s: float = Field(
        1800.0, gt=0, description="How long the hooks' capture process waits for a call before it exits."
    )
    hooks_exclude: str = Field(
        ".env,.env.*,*.pem,*.key,*.p12,id_rsa*,id_ed25519*,secrets/*,**/secrets/*",
        description="Comma-separated globs of project files whose edits the hooks never note.",
    )
    hooks_summary_tokens_per_day: int = Field(
        0,
        ge=0,
        description="Tokens a day the chat model (MNEMO_SYNTHESIS_*) may spend on hook session summaries; 0: none.",
    )
    shared_max_words: int = Field(200, ge=1, description="Most words in one entry of the shared space (spec 003).")
    shared_max_entries: int = Field(
        1000, ge=1, description="Entries the shared space holds before the oldest are rotated into its archive."
    )

    archive_quota_bytes: int | None = Field(
        None, ge=0, description="Archived content (compressed bytes, glacier and deep_archive) a store may hold."
    )
    archive_prices: dict[str, float] = Field(
        default_factory=dict,
        description="USD per GB-month held in the live database or a tier, and per GB restored, as JSON, e.g. "
        '{"active": 0.1, "cold": 0.01, "glacier": 0.004, "deep_archive": 0.001, "restore": 0.02}; 0 if unset.',
    )
    synthesis_url: str | None = Field(
        None, description="Base URL of an OpenAI-compatible chat API for consolidation's ai_synthesis."
    )
    synthesis_model: str | None = Field(None, description="Model name sent to that chat API.")
    synthesis_api_key: str | None = Field(None, description="Bearer key for that chat API, if it needs one.")
    synthesis_timeout_s: float = Field(60.0, gt=0, description="How long a synthesis may take before it fails.")
    maintenance_interval_s: int = Field(
        3600, ge=0, description="How often a server runs the maintenance pass after the one at start (0: only then)."
    )
    expired_grace_days: int = Field(
        7, ge=0, le=3650, description="Days after its expires_at before maintenance forgets an expired memory."
    )
    rate_limits: str = Field(
        "", description="HTTP: calls per user and window, over spec 004's table: e.g. `store_memory=50,*=1000`, or off."
    )
    rate_window_s: int = Field(60, ge=1, le=86_400, description="HTTP: the rate limits' window (spec 004: a minute).")
    public_url: str | None = Field(
        None, description="HTTP: the MCP endpoint's URL as clients reach it (behind a proxy), e.g. https://x/mcp."
    )
    oauth_issuer: str | None = Field(None, description="HTTP: accept JWT bearer tokens from this OAuth issuer.")
    oauth_jwks_url: str | None = Field(
        None, description="HTTP: the issuer's JWKS (default: the issuer's /.well-known/jwks.json)."
    )
    oauth_audience: str | None = Field(None, description="HTTP: the audience tokens must name (default: public URL).")
    oauth_user_claim: str = Field("sub", description="HTTP: the token claim that names the user.")
    oauth_role_claim: str | None = Field(
        None, description="HTTP: a token claim holding admin, member or reader (default: every user a member)."
    )

    @property
    def registry_file(self) -> Path:
        """The store registry (spec 002): store names mapped to folders; see ``mnemo.engine.registry``.

        The default home also reads the registry an older mnemo kept in the platform's config folder
        (shared by every home) while it has none of its own: no other home inherits its stores."""
        if self.config_dir is not None:
            return self.config_dir / "stores.toml"
        own, older = self.home / "stores.toml", platform_config_dir() / "stores.toml"
        return older if self.home == default_home() and not own.exists() and older.exists() else own

    def stores(self) -> dict[str, Path]:
        """Every registered store by name, ``default`` included."""
        return registry.known(self.registry_file, self.home)

    def store_folder(self, name: str | None = None, *, create: bool = False) -> Path:
        """A known store's folder: ``default`` or a registered one; no other name reaches a folder.

        A name is checked before anything else (so ``../x`` never names a path); an unknown one is
        ``NotFound`` listing the known ones, unless ``create`` registers it under ``home/stores``
        (what ``mnemo stores add NAME`` does): a mistyped name never makes a store of its own.
        """
        chosen = registry.check_name(name or self.store)
        known = self.stores()
        if chosen in known:
            return known[chosen]
        if create:
            return registry.add(self.registry_file, self.home, chosen, self.home / "stores" / chosen)
        raise NotFound(
            f"no store named {chosen!r}; known stores: {', '.join(known)}. Create it on purpose with "
            f"`mnemo stores add {chosen}`",
            store=chosen,
            known=list(known),
        )

    @property
    def cache_dir(self) -> Path:
        """What mnemo can rebuild from its inputs, e.g. the category read-out fitted to the model."""
        return self.home / "cache"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "mnemo.log"
