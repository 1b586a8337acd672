"""Profile ``full``, continued: spec 004's lifecycle tools (archive_memory, restore_memory).

The same conventions as ``full``: the spec's inputs and outputs plus ``api_version``; errors are
the common error object (``full.error_result``). The rules live in ``mnemo.lifecycle``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from mcp.server import MCPServer
from pydantic import BaseModel, ConfigDict, Field

from mnemo.lifecycle.archive import MAX_ARCHIVE_IDS, MAX_RESTORE_IDS, Archiver, Criteria
from mnemo.model import MAX_REASON_CHARS, to_iso
from mnemo.profiles import Omitted, hints, run
from mnemo.service import MemoryService

API_VERSION = "1.0.0"
MAX_CRITERIA_CATEGORIES = 20


class _Output(BaseModel):
    api_version: str = API_VERSION
    success: bool = True


class AutoArchiveCriteria(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra={"minProperties": 1})

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


class ArchivedMemoryOut(BaseModel):
    memory_id: str
    archive_id: str | None
    archive_tier: str
    archived_at: str
    retrieval_time_estimate_ms: float
    storage_cost_reduction: float


class ArchiveMemoryResult(_Output):
    archive_job_id: str
    archived_count: int
    memories_archived: list[ArchivedMemoryOut]
    storage_saved_bytes: int
    estimated_monthly_savings: float
    embeddings_retained: bool
    total_cost: float
    dry_run: bool = False


class RestoredMemoryOut(BaseModel):
    memory_id: str
    archive_id: str | None
    restored_at: str
    restore_mode: str
    embeddings_regenerated: bool
    restoration_time_ms: float


class RestoreMemoryResult(_Output):
    restore_job_id: str
    status: Literal["completed"] = "completed"
    restored_count: int
    memories_restored: list[RestoredMemoryOut]
    total_cost: float
    estimated_time_remaining_ms: float


MemoryId = Annotated[str, Field(min_length=1, max_length=100)]
Reason = Annotated[str, Field(max_length=MAX_REASON_CHARS)]


def register(server: MCPServer, service: MemoryService) -> None:
    archiver = Archiver(service, service.lifecycle)

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
