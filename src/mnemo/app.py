"""The composition root for library use: settings → storage, embedder → service.

from mnemo.app import open_service
memories = open_service()            # the default store under MNEMO_HOME
memories.store("Emma is lactose intolerant")
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mnemo.clock import Clock
from mnemo.config import Settings
from mnemo.embed import Embedder
from mnemo.engine import registry
from mnemo.engine.service import MemoryService
from mnemo.engine.space_limits import SharedLimits
from mnemo.errors import InvalidInput, NotFound
from mnemo.lifecycle.settings import LifecycleSettings, SynthesisEndpoint
from mnemo.search.enrich import CategoryDetector
from mnemo.storage import Storage, sqlite_files
from mnemo.storage.sql_store import SQLStore
from mnemo.storage.sqlite import SQLiteStorage

if TYPE_CHECKING:
    from mnemo.storage.postgres import PostgresStorage  # imported when a store is in PostgreSQL

log = logging.getLogger(__name__)


def make_embedder(settings: Settings) -> Embedder | None:
    """The embedder the settings ask for; None (words only) when the local model is not installed."""
    match settings.embedder:
        case "none":
            return None
        case "http":
            from mnemo.embed.http import HttpEmbedder

            if not (settings.embedding_url and settings.embedding_model and settings.embedding_dimension):
                raise InvalidInput(
                    "embedder=http needs MNEMO_EMBEDDING_URL, MNEMO_EMBEDDING_MODEL and MNEMO_EMBEDDING_DIMENSION"
                )
            return HttpEmbedder(
                settings.embedding_url,
                settings.embedding_model,
                settings.embedding_dimension,
                api_key=settings.embedding_api_key,
            )
        case "local":
            from mnemo.embed.local import LocalEmbedder

            if not LocalEmbedder.available(settings.model_dir, settings.model_variant, settings.model):
                log.warning(
                    "the local embedding model %s is not installed (run `mnemo setup --model %s`): "
                    "recall uses words only",
                    settings.model,
                    settings.model,
                )
                return None
            return LocalEmbedder(settings.model_dir, model=settings.model, variant=settings.model_variant)


def open_storage(settings: Settings, folder: Path, name: str) -> Storage:
    """The store's backend: its schema in the PostgreSQL database of MNEMO_DATABASE_URL, else SQLite in its folder."""
    if settings.database_url:
        folder.mkdir(parents=True, exist_ok=True)  # its archive files, backups and vector snapshots stay local
        return _postgres(settings, settings.database_url, name, folder / sqlite_files.INDEX_FOLDER)
    return SQLiteStorage(folder, name, settings.busy_timeout_s)


def _postgres(settings: Settings, url: str, name: str, index_home: Path | None = None) -> PostgresStorage:
    from mnemo.storage.postgres import PostgresStorage

    return PostgresStorage(
        url,
        name,
        settings.database_pool_size,
        settings.busy_timeout_s,
        statement_timeout_s=settings.database_statement_timeout_s,
        pool_timeout_s=settings.database_pool_timeout_s,
        index_home=index_home,
    )


def open_storage_at(settings: Settings, location: str, name: str) -> SQLStore:
    """A store by where it is: ``sqlite:PATH`` (a store's folder, or the memory.db in it) or a
    ``postgresql://`` URL (the store ``name`` in that database). For ``mnemo migrate``."""
    if location.startswith(("postgresql://", "postgres://")):
        return _postgres(settings, location, name)
    if not location.startswith("sqlite:"):
        raise InvalidInput(f"{location!r} is neither sqlite:PATH nor a postgresql:// URL", location=location)
    path = Path(location.removeprefix("sqlite:")).expanduser()
    folder = path.parent if path.name == sqlite_files.DB_FILENAME else path
    return SQLiteStorage(folder.resolve(), name, settings.busy_timeout_s)


def lifecycle_settings(folder: Path, settings: Settings) -> LifecycleSettings:
    endpoint = None
    if settings.synthesis_url and settings.synthesis_model:
        endpoint = SynthesisEndpoint(
            settings.synthesis_url, settings.synthesis_model, settings.synthesis_api_key, settings.synthesis_timeout_s
        )
    return LifecycleSettings(folder, settings.archive_quota_bytes, settings.archive_prices, endpoint)


def readout_folders(settings: Settings) -> tuple[Path, ...]:
    """Where the category read-out fitted to the model is looked for: beside the local model's
    files (``mnemo setup`` fits it there), then in the home's cache."""
    if settings.embedder == "local":
        from mnemo.embed.model_files import default_model_dir

        return (settings.model_dir or default_model_dir(settings.model), settings.cache_dir)
    return (settings.cache_dir,)


def open_service(
    settings: Settings | None = None,
    store: str | None = None,
    *,
    actor: str = "mnemo",
    clock: Clock | None = None,
    embedder: Embedder | Literal["from settings"] | None = "from settings",
    create: bool = False,
) -> MemoryService:
    """The service of a known store (see ``Settings.store_folder``); ``create`` registers a new one."""
    settings = settings or Settings()
    name = store or settings.store
    return _service_at(settings, settings.store_folder(name, create=create), name, actor, clock, embedder)


def open_location(
    settings: Settings,
    location: str,
    *,
    actor: str = "mnemo",
    clock: Clock | None = None,
    embedder: Embedder | Literal["from settings"] | None = "from settings",
) -> MemoryService:
    """A store by registry name, or by path: an existing store folder, or the memory.db in it."""
    if not registry.is_path(location):
        return open_service(settings, location, actor=actor, clock=clock, embedder=embedder)
    path = Path(location).expanduser()
    folder = path.parent if path.name == sqlite_files.DB_FILENAME else path
    if not folder.is_dir():
        raise NotFound(
            f"no folder {location!r} to sync with: make it first (an empty one starts a new store)", location=location
        )
    # A folder is a SQLite store, whatever database the named stores are in (a laptop's, to sync with).
    local = settings.model_copy(update={"database_url": None})
    return _service_at(local, folder.resolve(), folder.resolve().name, actor, clock, embedder)


def _service_at(
    settings: Settings,
    folder: Path,
    name: str,
    actor: str,
    clock: Clock | None,
    embedder: Embedder | Literal["from settings"] | None,
) -> MemoryService:
    storage = open_storage(settings, folder, name)
    chosen = make_embedder(settings) if embedder == "from settings" else embedder
    return MemoryService(
        storage,
        clock,
        chosen,
        CategoryDetector(chosen, readout_folders(settings)),
        recency_half_life_days=settings.recency_half_life_days,
        max_memories=settings.max_memories,
        vector_graph_from=settings.vector_graph_from,
        shared_limits=SharedLimits(settings.shared_max_words, settings.shared_max_entries, folder),
        lifecycle=replace(
            lifecycle_settings(folder, settings),
            # another store of the registry, by name, for sync (sharing this one's embedder and clock)
            locations=lambda other: open_location(settings, other, actor=actor, clock=clock, embedder=chosen),
        ),
        actor=actor,
    )


def restore_store(settings: Settings, store: str | None = None, backup: Path | None = None) -> sqlite_files.Restored:
    """Put a store's newest whole backup (or ``backup``) in place of its database, which is set aside.

    Stop the servers that use the store first: they hold the old file open.
    """
    name = store or settings.store
    return sqlite_files.restore(settings.store_folder(name), name, backup, datetime.now(UTC))
