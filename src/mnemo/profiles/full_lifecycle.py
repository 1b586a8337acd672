"""Profile ``full``, continued: spec 004's lifecycle tools (consolidate, archive and restore memories).

The same conventions as ``full``: the spec's inputs and outputs plus ``api_version``; errors are
the common error object (``full.error_result``). The rules live in ``mnemo.lifecycle``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

import anyio.from_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types import SamplingMessage, TextContent
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from mnemo.bounds import MAX_ID_CHARS
from mnemo.engine.service import MemoryService
from mnemo.errors import OperationFailed
from mnemo.lifecycle import jobs, synthesis
from mnemo.lifecycle.archive import MAX_ARCHIVE_IDS, MAX_RESTORE_IDS, Archiver, Criteria
from mnemo.lifecycle.consolidate import MAX_INSTRUCTIONS_CHARS, MAX_SOURCES, MIN_SOURCES, Consolidator, PreserveMetadata
from mnemo.lifecycle.sync import SyncFilters, run_sync
from mnemo.model import MAX_REASON_CHARS, canonical_category, to_iso
from mnemo.profiles import Omitted, hints, run
from mnemo.profiles.full_schemas import Output

MAX_CRITERIA_CATEGORIES = 20


NEXT_SYNC = timedelta(hours=12)  # what a sync's answer recommends for the next one
MAX_SYNC_CATEGORIES = 20
MAX_LOCATION_CHARS = 1024  # a store name (64) or, for a local caller, a folder's path


class AutoArchiveCriteria(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    inactive_days: Annotated[int, Field(ge=1, le=36_500)] | Omitted = Field(
        None, description="Archive if not accessed for this many days"
    )
    low_importance: Annotated[float, Field(ge=0, le=1)] | Omitted = Field(
        None, description="Archive if importance below this threshold"
    )
    categories: Annotated[list[Annotated[str, Field(max_length=50)]], Field(max_length=MAX_CRITERIA_CATEGORIES)] | (
        Omitted
    ) = Field(None, description="Archive memories in these categories")
    before_date: datetime | Omitted = Field(None, description="Archive memories created before this date")

    def value(self) -> Criteria:
        categories = None if self.categories is None else tuple(self.categories)
        return Criteria(self.inactive_days, self.low_importance, categories, self.before_date)


class PreserveMetadataInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    earliest_timestamp: bool = True
    highest_importance: bool = True
    all_tags: bool = True
    all_links: bool = True

    def value(self) -> PreserveMetadata:
        return PreserveMetadata(self.earliest_timestamp, self.highest_importance, self.all_tags, self.all_links)


class Provenance(BaseModel):
    source_count: int
    synthesis_method: str
    originals_archived: bool
    archive_ids: list[str]


class ConsolidateMemoriesResult(Output):
    consolidated_memory_id: str
    source_memory_ids: list[str]
    content: str
    category: str
    tags: list[str]
    importance: float
    created_at: str
    consolidated_at: str
    provenance: Provenance
    warnings: list[str] = Field(default_factory=list)


class ArchivedMemoryOut(BaseModel):
    memory_id: str
    archive_id: str | None
    archive_tier: str
    archived_at: str
    retrieval_time_estimate_ms: float
    storage_cost_reduction: float


class ArchiveMemoryResult(Output):
    archive_job_id: str
    archived_count: int
    memories_archived: list[ArchivedMemoryOut]
    storage_saved_bytes: int
    estimated_monthly_savings: float
    embeddings_retained: bool
    total_cost: float
    dry_run: bool = False


class SyncFiltersIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    categories: Annotated[list[str], Field(max_length=MAX_SYNC_CATEGORIES)] | Omitted = None
    user_id: Annotated[str, Field(max_length=MAX_ID_CHARS)] | Omitted = None
    conversation_id: Annotated[str, Field(max_length=MAX_ID_CHARS)] | Omitted = None
    modified_since: datetime | Omitted = None


class SyncSummary(BaseModel):
    total_checked: int
    synced: int
    created: int
    updated: int
    deleted: int
    conflicts: int
    conflicts_resolved: int
    skipped: int
    errors: int


class ConflictHandled(BaseModel):
    memory_id: str
    resolution: str
    winner: str


class SyncMemoriesResult(Output):
    sync_id: str  # also its job: mnemo://jobs/{sync_id}
    sync_type: str
    source: str
    destination: str
    started_at: str
    completed_at: str | None  # None while a background sync runs
    duration_ms: float
    summary: SyncSummary
    conflicts_handled: list[ConflictHandled]
    next_sync_recommended: str | None
    dry_run: bool = False


class RestoredMemoryOut(BaseModel):
    memory_id: str
    archive_id: str | None
    restored_at: str
    restore_mode: str
    embeddings_regenerated: bool
    restoration_time_ms: float


class RestoreMemoryResult(Output):
    restore_job_id: str
    status: Literal["completed"] = "completed"
    restored_count: int
    memories_restored: list[RestoredMemoryOut]
    total_cost: float
    estimated_time_remaining_ms: float


MemoryId = Annotated[str, Field(min_length=1, max_length=100)]
Reason = Annotated[str, Field(max_length=MAX_REASON_CHARS)]


def sampling_synthesizer(ctx: Context[Any, Any]) -> synthesis.Synthesizer | None:
    """The client's own model through MCP sampling, when this connection can carry it.

    Sampling is deprecated from MCP 2026-07-28 on and 2026-era connections have no back channel
    for it, so it is offered only on a connection whose client declared it (a legacy one). A call
    made in process (the REST API) has no connection at all.
    """
    try:
        session = ctx.session
    except ValueError:  # "Context is not available outside of a request"
        return None
    capabilities = session.client_capabilities
    if capabilities is None or capabilities.sampling is None or not session.can_send_request:
        return None

    async def ask(contents: Sequence[str], instructions: str | None) -> str:
        text = synthesis.prompt(contents, instructions)
        message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)  # deprecated, and the only way to the model
                result = await session.create_message(
                    [message], max_tokens=synthesis.MAX_TOKENS, system_prompt=synthesis.SYSTEM_PROMPT
                )
        except MCPError as error:
            raise OperationFailed(f"synthesis by the client failed: {error}") from error
        if not isinstance(result.content, TextContent):
            raise OperationFailed("synthesis by the client answered with no text")
        return synthesis.merged_text({"choices": [{"message": {"content": result.content.text}}]}, "the client")

    return lambda contents, instructions: anyio.from_thread.run(ask, contents, instructions)


def register(server: MCPServer, service: MemoryService) -> None:
    archiver = Archiver(service, service.lifecycle)
    consolidator = Consolidator(service, archiver)

    @server.resource(
        "mnemo://jobs/{job_id}",
        name="job",
        mime_type="application/json",
        description="A recorded job (the job_id of archive_memory and restore_memory): its status, progress and result",
    )
    async def job(job_id: str) -> str:
        found = await run(jobs.find, service.storage, job_id)
        return json.dumps(jobs.shown(found), ensure_ascii=False)

    @server.tool(annotations=hints("Consolidate memories", read_only=False, destructive=False, idempotent=False))
    async def consolidate_memories(
        memory_ids: Annotated[
            list[MemoryId],
            Field(min_length=MIN_SOURCES, max_length=MAX_SOURCES, description="IDs of memories to consolidate"),
        ],
        consolidation_strategy: Annotated[
            Literal["merge_all", "keep_primary", "ai_synthesis"], Field(description="How to merge the memories")
        ],
        ctx: Context[Any, Any],
        primary_memory_id: Annotated[
            MemoryId, Field(description="Primary memory to keep (required if strategy is 'keep_primary')")
        ]
        | Omitted = None,
        synthesis_instructions: Annotated[
            str, Field(max_length=MAX_INSTRUCTIONS_CHARS, description="Custom instructions for AI synthesis")
        ]
        | Omitted = None,
        preserve_metadata: PreserveMetadataInput | Omitted = Field(None, description="Which metadata to preserve"),
        keep_originals: Annotated[bool, Field(description="Keep original memories as archived versions")] = True,
        require_synthesis: Annotated[
            bool,
            Field(
                description="ai_synthesis only: fail (422) instead of merging without a language model when "
                "none is configured and the client offers no sampling"
            ),
        ] = False,
    ) -> ConsolidateMemoriesResult:
        """Merge related or duplicate memories into a single, coherent memory with preserved provenance.

        ai_synthesis uses the configured chat model (MNEMO_SYNTHESIS_URL) or the client's, through
        sampling; with neither it merges like merge_all and says so in warnings.
        """
        done = await run(
            consolidator.consolidate,
            memory_ids,
            consolidation_strategy,
            primary_memory_id=primary_memory_id,
            synthesis_instructions=synthesis_instructions,
            preserve=(preserve_metadata or PreserveMetadataInput()).value(),
            keep_originals=keep_originals,
            require_synthesis=require_synthesis,
            sampling=sampling_synthesizer(ctx) if consolidation_strategy == "ai_synthesis" else None,
        )
        m = done.memory
        return ConsolidateMemoriesResult(
            consolidated_memory_id=m.id,
            source_memory_ids=done.source_ids,
            content=m.content,
            category=canonical_category(m.category).value,
            tags=list(m.all_tags),
            importance=m.importance,
            created_at=to_iso(m.created_at),
            consolidated_at=to_iso(done.consolidated_at),
            provenance=Provenance(
                source_count=len(done.source_ids),
                synthesis_method=done.method,
                originals_archived=done.originals_archived,
                archive_ids=done.archive_ids,
            ),
            warnings=done.warnings,
        )

    @server.tool(annotations=hints("Archive memories", read_only=False, destructive=False, idempotent=False))
    async def archive_memory(
        memory_id: Annotated[MemoryId, Field(description="ID of memory to archive (use memory_ids for batch)")]
        | Omitted = None,
        memory_ids: Annotated[
            list[MemoryId], Field(max_length=MAX_ARCHIVE_IDS, description="IDs of memories to archive in batch")
        ]
        | Omitted = None,
        auto_archive_criteria: AutoArchiveCriteria | Omitted = Field(
            None, description="Criteria for automatic archival (instead of specific IDs)"
        ),
        archive_tier: Annotated[
            Literal["cold", "glacier", "deep_archive"], Field(description="Storage tier for archived memories")
        ] = "cold",
        retain_embeddings: Annotated[bool, Field(description="Keep embeddings for potential semantic search")] = False,
        reason: Annotated[Reason, Field(description="Reason for archival")] | Omitted = None,
        dry_run: Annotated[bool, Field(description="Preview what would be archived")] = False,
    ) -> ArchiveMemoryResult:
        """Move memories to cold storage for long-term retention with reduced access costs and performance.

        cold keeps the content in the database, out of default recall and lists; glacier compresses it
        and drops it from the word and vector indexes; deep_archive moves it to an archive file.
        """
        result = await run(
            archiver.archive,
            memory_id,
            memory_ids,
            auto_archive_criteria.value() if auto_archive_criteria is not None else None,
            tier=archive_tier,
            retain_embeddings=retain_embeddings,
            reason=reason,
            dry_run=dry_run,
        )
        return ArchiveMemoryResult(
            archive_job_id=result.job_id,
            archived_count=len(result.archived),
            memories_archived=[
                ArchivedMemoryOut(
                    memory_id=a.memory_id,
                    archive_id=a.archive_id,
                    archive_tier=a.tier,
                    archived_at=to_iso(a.archived_at),
                    retrieval_time_estimate_ms=a.retrieval_time_estimate_ms,
                    storage_cost_reduction=a.storage_cost_reduction,
                )
                for a in result.archived
            ],
            storage_saved_bytes=result.saved_bytes,
            estimated_monthly_savings=result.monthly_savings,
            embeddings_retained=result.embeddings_retained,
            total_cost=result.total_cost,
            dry_run=result.dry_run,
        )

    @server.tool(annotations=hints("Restore memories", read_only=False, destructive=False, idempotent=False))
    async def restore_memory(
        memory_id: Annotated[MemoryId, Field(description="ID of archived memory to restore")] | Omitted = None,
        archive_id: Annotated[MemoryId, Field(description="Archive ID (alternative to memory_id)")] | Omitted = None,
        memory_ids: Annotated[
            list[MemoryId], Field(max_length=MAX_RESTORE_IDS, description="Batch restore multiple memories")
        ]
        | Omitted = None,
        restore_mode: Annotated[
            Literal["full", "metadata_only", "expedited"], Field(description="How to restore the memory")
        ] = "full",
        regenerate_embeddings: Annotated[bool, Field(description="Regenerate embeddings if not retained")] = True,
        reason: Annotated[Reason, Field(description="Reason for restoration")] | Omitted = None,
        priority: Annotated[Literal["low", "normal", "high"], Field(description="Restoration priority")] = "normal",
    ) -> RestoreMemoryResult:
        """Retrieve archived memories from cold storage back to active status.

        full brings content, word index and embeddings back; expedited the same, embedding in the
        background; metadata_only makes the memory active while its content stays in its tier.
        """
        result = await run(
            archiver.restore,
            memory_id,
            archive_id,
            memory_ids,
            mode=restore_mode,
            regenerate_embeddings=regenerate_embeddings,
            reason=reason,
        )
        return RestoreMemoryResult(
            restore_job_id=result.job_id,
            restored_count=len(result.restored),
            memories_restored=[
                RestoredMemoryOut(
                    memory_id=r.memory_id,
                    archive_id=r.archive_id,
                    restored_at=to_iso(r.restored_at),
                    restore_mode=r.mode,
                    embeddings_regenerated=r.embeddings_regenerated,
                    restoration_time_ms=r.restoration_time_ms,
                )
                for r in result.restored
            ],
            total_cost=result.total_cost,
            estimated_time_remaining_ms=result.remaining_ms,
        )

    @server.tool(annotations=hints("Sync memories", read_only=False, destructive=False, idempotent=False))
    async def sync_memories(
        sync_type: Annotated[
            Literal["full", "incremental", "bidirectional", "push", "pull"],
            Field(description="Type of synchronization"),
        ] = "incremental",
        source: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_LOCATION_CHARS,
                description="Source identifier (device, surface, or storage)",
            ),
        ] = "local",
        destination: Annotated[
            str, Field(min_length=1, max_length=MAX_LOCATION_CHARS, description="Destination identifier")
        ] = "cloud",
        filters: Annotated[SyncFiltersIn, Field(description="Only sync memories matching these filters")]
        | Omitted = None,
        conflict_resolution: Annotated[
            Literal["source_wins", "destination_wins", "newest_wins", "merge", "manual"],
            Field(description="How to handle conflicts"),
        ] = "newest_wins",
        dry_run: Annotated[StrictBool, Field(description="Preview changes without applying them")] = False,
        background: Annotated[
            StrictBool, Field(description="Run sync in background (returns immediately with job_id)")
        ] = False,
    ) -> SyncMemoriesResult:
        """Force synchronization of memories across different surfaces, devices, or storage backends.

        Locations are store names: local is this server's store, any other a store of the registry
        (`mnemo stores add cloud PATH` maps cloud). Memories keep their ids; deletions travel.
        """
        f = filters or SyncFiltersIn()
        chosen = SyncFilters(
            tuple(f.categories) if f.categories else None, f.user_id, f.conversation_id, f.modified_since
        )
        report = await run(
            run_sync,
            service,
            source,
            destination,
            background=background,
            sync_type=sync_type,
            filters=chosen,
            conflict_resolution=conflict_resolution,
            dry_run=dry_run,
        )
        done = report.completed_at
        return SyncMemoriesResult(
            sync_id=report.sync_id,
            sync_type=report.sync_type,
            source=report.source,
            destination=report.destination,
            started_at=to_iso(report.started_at),
            completed_at=to_iso(done) if done else None,
            duration_ms=report.duration_ms,
            summary=SyncSummary(
                total_checked=report.checked,
                synced=report.created + report.updated + report.deleted,
                created=report.created,
                updated=report.updated,
                deleted=report.deleted,
                conflicts=report.conflicts,
                conflicts_resolved=report.conflicts_resolved,
                skipped=report.skipped,
                errors=report.errors,
            ),
            conflicts_handled=[ConflictHandled(**c) for c in report.conflicts_handled],
            next_sync_recommended=to_iso(done + NEXT_SYNC) if done else None,
            dry_run=report.dry_run,
        )
