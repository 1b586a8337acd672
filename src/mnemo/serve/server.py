"""The MCP server: one profile's tools over one service, on stdio.

This is the composition root of a served mnemo: settings → storage → service → profile → server.
Nothing here is a module-level singleton, so a test builds a whole server around a temporary store.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent
from pydantic import ValidationError

from mnemo import __version__
from mnemo.access.keys import KeyRing
from mnemo.access.request_ledger import RateLimits, failed_for_now
from mnemo.app import open_service
from mnemo.clock import Clock
from mnemo.config import Settings
from mnemo.engine.named_stores import NamedStores
from mnemo.engine.service import MemoryService
from mnemo.errors import (
    MAX_FIELD_CHARS,
    EmbeddingError,
    InvalidInput,
    MnemoError,
    StorageError,
    Unavailable,
    clipped,
)
from mnemo.lifecycle.jobs import close_abandoned
from mnemo.lifecycle.maintenance import maintain
from mnemo.profiles import Profile, get_profile
from mnemo.profiles.arguments import read_arguments_strictly, unknown_argument
from mnemo.profiles.tool_schemas import serve_lean_schemas
from mnemo.serve.options import HttpOptions
from mnemo.serve.stdio import guarded_stdio

if TYPE_CHECKING:
    from mnemo.serve.oauth import OAuthSettings

log = logging.getLogger("mnemo")


SHOWN_PROBLEMS = 10  # an error names at most this many of the problems found, whatever the input


def _describe(error: ValidationError, schema: dict[str, Any]) -> InvalidInput:
    """The profile's invalid-input error for a validation failure against the tool's input schema."""
    found = error.errors(include_url=False, include_context=False, include_input=False)
    # An optional argument is "X or absent": that it is not absent either says nothing more.
    found = [e for e in found if e["type"] != "none_required"] or found
    problems = []
    for e in found[:SHOWN_PROBLEMS]:
        field, message = ".".join(str(part) for part in e["loc"]) or "arguments", e["msg"]
        if e["type"] == "extra_forbidden":
            field, message = unknown_argument(schema, e["loc"])
        problems.append({"field": clipped(field, MAX_FIELD_CHARS), "message": message})
    summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
    if len(found) > SHOWN_PROBLEMS:
        summary += f"; and {len(found) - SHOWN_PROBLEMS} more"
    return InvalidInput(f"invalid input: {summary}", errors=problems)


class ProfileServer(MCPServer):
    """An MCPServer whose every tool failure is answered in its profile's error shape."""

    def __init__(
        self, profile: Profile, service: MemoryService, stores: NamedStores | None = None, **kwargs: Any
    ) -> None:
        super().__init__(f"mnemo-{profile.name}", instructions=profile.instructions, version=__version__, **kwargs)
        self.profile = profile
        self.service = service
        self.stores = stores
        if profile.register is not None:
            profile.register(self, service)
        if profile.register_stores is not None:
            if stores is None:
                raise ValueError(f"profile {profile.name!r} serves named stores: pass them")
            profile.register_stores(self, stores)
        serve_lean_schemas(self)
        read_arguments_strictly(self)

    async def run_stdio_async(self) -> None:
        """Serve on stdin/stdout through mnemo's guarded transport (see ``mnemo.serve.stdio``)."""
        # The SDK runs a server on given streams only through its low-level server; its
        # run_stdio_async is this method with the SDK's own, unguarded, stdio transport.
        lowlevel = self._lowlevel_server
        async with guarded_stdio() as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    def close(self) -> None:
        """Close every store this server opened (the named ones include its own)."""
        if self.stores is not None:
            self.stores.close()
        self.service.close()

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                schema = self._tool_manager.get_tool(name).parameters  # type: ignore[union-attr]
                return self.profile.error_result(_describe(cause, schema), self.service.clock.now())
            if isinstance(cause, MnemoError):
                log.info("tool %s failed: %s %s", name, cause.code, cause.message)
                failed_for_now(cause)
                return self.profile.error_result(cause, self.service.clock.now())
            if cause is None:  # the SDK's own refusal, e.g. an unknown tool name
                return self.profile.error_result(InvalidInput(str(exc)), self.service.clock.now())
            log.exception("tool %s crashed", name, exc_info=cause)
            return self.profile.error_result(
                MnemoError(f"internal error in {name}; see the server log"), self.service.clock.now()
            )
        if isinstance(result, CallToolResult) and result.structured_content is not None:
            # The SDK writes the text block as indented JSON of the same object: a third larger on
            # the wire and to parse. The specs ask for the JSON object, not for its layout.
            compact = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
            result.content = [TextContent(type="text", text=compact)]
        return result


def build_server(
    settings: Settings, profile: str | None = None, store: str | None = None, clock: Clock | None = None
) -> ProfileServer:
    chosen = get_profile(profile or settings.profile)
    actor = f"mcp:{chosen.name}"
    service = _opened_when_reachable(settings, store, actor, clock)
    if chosen.register_stores is None:
        return ProfileServer(chosen, service)
    # Calls name their store: each registered store is opened on first use, sharing the embedder.
    name = store or settings.store
    stores = NamedStores(
        settings.stores,
        lambda other: open_service(settings, other, actor=actor, clock=clock, embedder=service.embedder),
        {(name, settings.store_folder(name)): service},
    )
    return ProfileServer(chosen, service, stores)


def _opened_when_reachable(settings: Settings, store: str | None, actor: str, clock: Clock | None) -> MemoryService:
    """The served store; a server started before its database waits for it (MNEMO_DATABASE_WAIT_S),
    saying so, rather than exiting: it starts once the database answers."""
    give_up = time.monotonic() + settings.database_wait_s
    while True:
        try:
            return open_service(settings, store, actor=actor, clock=clock)
        except Unavailable as down:
            left = give_up - time.monotonic()
            if left <= 0:
                raise
            log.warning("%s; waiting for it (%.0f s more at most)", down.message, left)
            time.sleep(min(Unavailable.RETRY_AFTER_S, left))


def configure_logging(
    settings: Settings, formatter: logging.Formatter | None = None, request_ids: logging.Filter | None = None
) -> None:
    """Logs go to stderr and a rotating file in the data dir; stdout belongs to the protocol."""
    settings.log_file.parent.mkdir(parents=True, exist_ok=True)
    formatter = formatter or logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    to_file = logging.handlers.RotatingFileHandler(settings.log_file, maxBytes=10_000_000, backupCount=5)
    to_stderr = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    for handler in (to_file, to_stderr):
        handler.setFormatter(formatter)
        if request_ids is not None:
            handler.addFilter(request_ids)
        root.addHandler(handler)
    root.setLevel(settings.log_level.upper())


DAILY_BACKUP_S = 24 * 3600
STOP_TIMEOUT_S = 30  # how long a stopping server waits for its background work (a model load, a pass)


def _warm_up(service: MemoryService) -> None:
    try:
        service.warm_up()
        # Then a copy of the store as it is at start, once a day at most, if it checks whole.
        if backup := service.storage.back_up("at-start", min_interval_s=DAILY_BACKUP_S):
            log.info("backed up store %s to %s", service.storage.name, backup)
    except EmbeddingError as exc:
        log.warning("embedding model unavailable, recall uses words only: %s", exc.message)
    except MnemoError as exc:  # e.g. a damaged store: the server still answers, each call with the error
        log.error("store unusable: %s", exc.message)


class Background:
    """A server's background thread: warm up, then the maintenance pass now and every interval.

    ``stop`` ends it before the server closes its stores: a pass never runs on a closed store, and
    the process never exits while the model is loading in native threads (which aborts it).
    """

    def __init__(self, service: MemoryService, settings: Settings) -> None:
        self.service = service
        self.settings = settings
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mnemo-background", daemon=True)

    def start(self) -> None:
        if not self._thread.is_alive() and not self._stopping.is_set():
            self._thread.start()

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        service = self.service
        try:
            if closed := close_abandoned(service.storage, service.clock):
                log.warning("marked %d jobs failed: the processes running them had ended", closed)
        except MnemoError as exc:
            log.error("store unusable: %s", exc.message)
        _warm_up(service)
        grace = timedelta(days=self.settings.expired_grace_days)
        while not self._stopping.is_set():
            try:
                maintain(service, grace)
            except MnemoError as exc:
                log.error("maintenance of store %s failed: %s", service.storage.name, exc.message)
            if not self.settings.maintenance_interval_s or self._stopping.wait(self.settings.maintenance_interval_s):
                return


class WarmUpAfterHandshake:
    """Middleware that starts the background work (``start``) with the first message after ``initialize``.

    The model's imports and load hold the GIL for a few hundred milliseconds: started with the
    server, they would delay the handshake a client waits on; a first tool call comes later.
    """

    def __init__(self, start: Callable[[], None]) -> None:
        self._start = start  # returns at once (Background.start starts a thread)
        self._started = False

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if not self._started and ctx.method != "initialize":
            self._started = True
            self._start()
        return await call_next(ctx)


def oauth_settings(settings: Settings, options: HttpOptions) -> OAuthSettings | None:
    """OAuth resource-server mode when an issuer is configured; its resource is the public URL."""
    if settings.oauth_issuer is None:
        return None
    from mnemo.serve.oauth import OAuthSettings  # PyJWT loads only for this mode

    issuer = settings.oauth_issuer.rstrip("/")
    resource = settings.public_url or f"http://{options.host}:{options.port}/mcp"
    return OAuthSettings(
        issuer=settings.oauth_issuer,
        jwks_url=settings.oauth_jwks_url or f"{issuer}/.well-known/jwks.json",
        resource=resource,
        audience=settings.oauth_audience or resource,
        user_claim=settings.oauth_user_claim,
        role_claim=settings.oauth_role_claim,
    )


def serve_http(settings: Settings, options: HttpOptions, profile: str | None = None, store: str | None = None) -> None:
    """Serve over streamable HTTP (``mnemo.serve.http``) until stopped; logs are JSON lines."""
    from mnemo.serve import http  # uvicorn and starlette load only for this transport

    configure_logging(settings, http.JsonLines(), http.RequestIdFilter())
    server = build_server(settings, profile, store)
    try:
        limits = RateLimits.parse(settings.rate_limits, settings.rate_window_s)
        oauth = oauth_settings(settings, options)
        # The REST API speaks spec 004 whichever profile MCP serves, over the same store.
        rest_tools = server if server.profile.name == "full" else ProfileServer(get_profile("full"), server.service)
        background = Background(server.service, settings)
        try:
            http.run(server, KeyRing(settings.home), options, limits, oauth, rest_tools, background.start)
        finally:
            background.stop()
    finally:
        server.close()


def serve(settings: Settings, profile: str | None = None, store: str | None = None) -> None:
    if sys.stdin.isatty():  # started by hand: say what it waits for, since MCP clients start it themselves
        print(
            "mnemo serve speaks MCP on stdin/stdout and is started by an MCP client (Claude Desktop, Cursor...);"
            " it now waits for one. Ctrl-C to stop.",
            file=sys.stderr,
        )
    configure_logging(settings)
    server = build_server(settings, profile, store)
    # The model loads off the event loop, once the handshake is answered.
    background = Background(server.service, settings)
    server.middleware.append(WarmUpAfterHandshake(background.start))
    log.info("mnemo %s serving profile %s on stdio, store %s", __version__, server.profile.name, server.service.storage)
    try:
        server.run()
    except StorageError:
        log.exception("store failed")
        raise
    finally:
        background.stop()
        server.close()
    log.info("mnemo stopped")
