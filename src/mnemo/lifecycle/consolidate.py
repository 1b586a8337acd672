"""Merge related memories into one, with provenance (spec 004's consolidate_memories).

Strategies:

- ``merge_all``: one new memory whose content keeps every distinct statement of the sources once,
  oldest first; a sentence that says what an earlier one said (the same words, or as close as a
  rewrite with no fact-bearing word changed: see ``same_fact``) is kept once.
- ``keep_primary``: the primary keeps its content and gains the others' tags, links, importance and
  earliest date, as ``preserve_metadata`` says.
- ``ai_synthesis``: a language model writes the merged content (``synthesis``). Without one (no
  endpoint configured and a client that offers no sampling) the memories are merged as by
  ``merge_all`` and the answer says so, unless the caller required synthesis (422).

The sources are refused as too dissimilar (409) when one of them is not related to any other
(cosine under MIN_RELATEDNESS). Nothing is written before the content is settled, so a synthesis
that fails changes nothing. The originals are then archived (``keep_originals``, with their
archive ids) or forgotten softly, and the consolidated memory's history names its sources.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from mnemo import bounds
from mnemo.engine.service import MemoryService
from mnemo.errors import InvalidInput, NotFound, OperationFailed, TooDissimilar, Unprocessable
from mnemo.lazy import numpy as np
from mnemo.lifecycle.archive import Archiver
from mnemo.lifecycle.synthesis import ChatSynthesizer, Synthesizer
from mnemo.model import MAX_CONTENT_CHARS, AccessLevel, ForgetReason, Memory, Status, normalise_text
from mnemo.search import same_fact
from mnemo.search.twins import NEAR_DUPLICATE

STRATEGIES = ("merge_all", "keep_primary", "ai_synthesis")
MIN_SOURCES, MAX_SOURCES = 2, 50
MAX_INSTRUCTIONS_CHARS = 1_000
# Each source must reach this cosine with at least one other. benchmarks/consolidation_threshold.py
# on the dev sets: 96.5% of the 228 sets of memories that together answer one question (or hold the
# old and new fact of a current-state question) pass it; 42% of random pairs of one user's memories
# are refused. The model separates the two poorly, so the check only stops plainly unrelated sets.
MIN_RELATEDNESS = 0.25
ENABLE_SYNTHESIS = (
    "set MNEMO_SYNTHESIS_URL and MNEMO_SYNTHESIS_MODEL to an OpenAI-compatible chat API (e.g. Ollama at "
    "http://127.0.0.1:11434/v1), or connect with a client that offers MCP sampling"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True, slots=True)
class PreserveMetadata:
    earliest_timestamp: bool = True
    highest_importance: bool = True
    all_tags: bool = True
    all_links: bool = True


@dataclass(frozen=True, slots=True)
class Consolidation:
    memory: Memory
    source_ids: list[str]
    method: str  # the strategy that made the content
    originals_archived: bool
    archive_ids: list[str]
    consolidated_at: datetime
    warnings: list[str] = field(default_factory=list)


class Consolidator:
    def __init__(self, service: MemoryService, archiver: Archiver) -> None:
        self.service = service
        self.archiver = archiver
        endpoint = service.lifecycle.synthesis
        self.configured: Synthesizer | None = ChatSynthesizer(endpoint) if endpoint is not None else None

    def consolidate(
        self,
        memory_ids: Sequence[str],
        strategy: str = "ai_synthesis",
        *,
        primary_memory_id: str | None = None,
        synthesis_instructions: str | None = None,
        preserve: PreserveMetadata = PreserveMetadata(),
        keep_originals: bool = True,
        require_synthesis: bool = False,
        sampling: Synthesizer | None = None,
        actor: str | None = None,
    ) -> Consolidation:
        """Merge the memories; ``sampling`` is the client's model, used when no endpoint is configured."""
        ids = list(dict.fromkeys(memory_ids))
        if not MIN_SOURCES <= len(ids) <= MAX_SOURCES:
            raise InvalidInput(f"give {MIN_SOURCES} to {MAX_SOURCES} distinct memory_ids", field="memory_ids")
        bounds.listed("memory_ids", ids, MAX_SOURCES, bounds.MAX_ID_CHARS)
        bounds.text("synthesis_instructions", synthesis_instructions, MAX_INSTRUCTIONS_CHARS)
        if strategy not in STRATEGIES:
            raise InvalidInput(f"consolidation_strategy must be one of {', '.join(STRATEGIES)}", field="strategy")
        if strategy == "keep_primary" and primary_memory_id is None:
            raise InvalidInput("keep_primary needs primary_memory_id", field="primary_memory_id")
        sources = self._sources(ids, strategy, primary_memory_id)
        warnings = self._check_related(sources)
        content, method = self._content(sources, strategy, primary_memory_id, synthesis_instructions,
                                        require_synthesis, sampling, warnings)  # fmt: skip
        return self._write(sources, content, method, primary_memory_id, preserve, keep_originals, actor, warnings)

    # -- checks ----------------------------------------------------------------------------
    def _sources(self, ids: list[str], strategy: str, primary_id: str | None) -> list[Memory]:
        found = {m.id: m for m in self.service.storage.get_many(ids) if m.status is not Status.FORGOTTEN}
        missing = [i for i in ids if i not in found]
        if missing:
            raise NotFound(f"no memory with id {', '.join(missing)}", memory_ids=missing)
        inactive = [i for i in ids if found[i].status is not Status.ACTIVE]
        if inactive:
            raise Unprocessable(f"only active memories can be consolidated; not {', '.join(inactive)}",
                                memory_ids=inactive)  # fmt: skip
        users = {found[i].context.user_id for i in ids}
        if len(users) > 1:
            raise Unprocessable("the memories belong to different users", memory_ids=ids)
        if strategy == "keep_primary" and primary_id not in found:
            raise Unprocessable("primary_memory_id must be one of memory_ids", primary_memory_id=primary_id)
        return sorted((found[i] for i in ids), key=lambda m: m.created_at)

    def _check_related(self, sources: list[Memory]) -> list[str]:
        """TooDissimilar unless each source is close to another; without a model, a warning instead."""
        embedder = self.service.embedder
        if embedder is None:
            return ["no embedding model: whether the memories are related was not checked"]
        vectors = embedder.embed_documents([m.content for m in sources])
        similarity = vectors @ vectors.T
        np.fill_diagonal(similarity, -1.0)
        best = similarity.max(axis=1)
        apart = [m.id for m, score in zip(sources, best, strict=True) if score < MIN_RELATEDNESS]
        if apart:
            raise TooDissimilar(
                f"too dissimilar to consolidate: {', '.join(apart)} relate to none of the others "
                f"(cosine under {MIN_RELATEDNESS})",
                memory_ids=apart, weakest_similarity=round(float(best.min()), 4), threshold=MIN_RELATEDNESS,
            )  # fmt: skip
        return []

    # -- content ---------------------------------------------------------------------------
    def _content(
        self, sources: list[Memory], strategy: str, primary_id: str | None, instructions: str | None,
        required: bool, sampling: Synthesizer | None, warnings: list[str],
    ) -> tuple[str, str]:  # fmt: skip
        if strategy == "keep_primary":
            return next(m.content for m in sources if m.id == primary_id), strategy
        if strategy == "ai_synthesis":
            model = self.configured or sampling
            if model is not None:
                text = model([m.content for m in sources], instructions)
                try:
                    bounds.text("content", text, MAX_CONTENT_CHARS)
                except InvalidInput as error:  # the model's fault, not the caller's
                    raise OperationFailed(f"the synthesis cannot be stored: {error.message}") from error
                return text, strategy
            if required:
                raise Unprocessable(f"ai_synthesis needs a language model: {ENABLE_SYNTHESIS}")
            warnings.append(f"merged without a language model (merge_all); to synthesise, {ENABLE_SYNTHESIS}")
        return self._merge_all(sources), "merge_all"

    def _merge_all(self, sources: list[Memory]) -> str:
        """Every distinct statement once, oldest first."""
        sentences = [s.strip() for m in sources for s in _SENTENCE_END.split(m.content) if s.strip()]
        embedder = self.service.embedder
        vectors = embedder.embed_documents(sentences) if embedder is not None else None
        kept: list[int] = []
        for i in range(len(sentences)):
            if not any(self._same(sentences, vectors, i, j) for j in kept):
                kept.append(i)
        return " ".join(_terminated(sentences[i]) for i in kept)

    @staticmethod
    def _same(sentences: list[str], vectors: np.ndarray | None, i: int, j: int) -> bool:
        if normalise_text(sentences[i]) == normalise_text(sentences[j]):
            return True
        close = vectors is not None and float(vectors[i] @ vectors[j]) >= NEAR_DUPLICATE
        return close and same_fact.difference(sentences[i], sentences[j]) is None

    # -- writing ---------------------------------------------------------------------------
    def _write(
        self, sources: list[Memory], content: str, method: str, primary_id: str | None,
        preserve: PreserveMetadata, keep_originals: bool, actor: str | None, warnings: list[str],
    ) -> Consolidation:  # fmt: skip
        service = self.service
        now = service.clock.now()
        primary = next((m for m in sources if m.id == primary_id), None)
        lead = primary or sources[-1]  # the newest speaks for the set, unless a primary is named
        others = [m for m in sources if m is not primary]
        links = self._links(sources) if preserve.all_links else []
        tags = _union(m.tags for m in sources) if preserve.all_tags else list(lead.tags)
        importance = max(m.importance for m in sources) if preserve.highest_importance else lead.importance
        created = min(m.created_at for m in sources) if preserve.earliest_timestamp else lead.created_at
        why = f"consolidated ({method}) from {', '.join(m.id for m in sources)}"
        room = bounds.MAX_RELATED - len(sources)
        if len(links) > room or len(tags) > bounds.MAX_TAGS:
            warnings.append(f"kept the first {bounds.MAX_TAGS} tags and {room} links of the sources' "
                            f"{len(tags)} tags and {len(links)} links")  # fmt: skip
        tags, links = tags[: bounds.MAX_TAGS], links[:room]
        if primary is not None:
            memory = primary.evolve(tags=tuple(tags), importance=importance, created_at=created,
                                    version=primary.version + 1, updated_at=now)  # fmt: skip
            service.storage.save([(memory, service.change(memory, "consolidate", actor, why, previous=primary))])
            service.storage.add_links(memory.id, links, now)
        else:
            memory = service.store(
                content, context=lead.context, timestamp=created, category=_most_common(m.category for m in sources),
                subject=lead.subject, tags=tags, importance=importance, type=lead.type,
                access_level=_shared_level(sources), related_memory_ids=[*links, *(m.id for m in sources)],
                on_duplicate="allow", actor=actor, reason=why,
            ).memory  # fmt: skip
        archive_ids = self._retire(others, memory.id, keep_originals, actor)
        return Consolidation(memory, [m.id for m in sources], method, keep_originals, archive_ids, now, warnings)

    def _links(self, sources: list[Memory]) -> list[str]:
        ids = {m.id for m in sources}
        linked = {other for m in sources for other in self.service.storage.linked_ids(m.id)} - ids
        alive = self.service.storage.get_many(sorted(linked))
        return [m.id for m in alive if m.status is not Status.FORGOTTEN]

    def _retire(self, originals: list[Memory], into: str, keep: bool, actor: str | None) -> list[str]:
        if not originals:
            return []
        reason = f"consolidated into {into}"
        if keep:
            result = self.archiver.archive(memory_ids=[m.id for m in originals], tier="cold", reason=reason,
                                           actor=actor)  # fmt: skip
            return [a.archive_id for a in result.archived if a.archive_id]
        current = self.service.storage.get_many([m.id for m in originals])
        self.service.forget_softly(current, ForgetReason.DUPLICATE, reason, actor=actor)
        return []


def _terminated(sentence: str) -> str:
    return sentence if sentence[-1] in ".!?" else sentence + "."


def _union(tag_lists: Iterable[Sequence[str]]) -> list[str]:
    return list(dict.fromkeys(t for tags in tag_lists for t in tags))


def _most_common(categories: Iterable[str | None]) -> str | None:
    counts = Counter(c for c in categories if c)
    return counts.most_common(1)[0][0] if counts else None


def _shared_level(sources: list[Memory]) -> AccessLevel:
    """The consolidated memory is as private as the most private source."""
    levels = {m.access_level for m in sources}
    return next(iter(levels)) if len(levels) == 1 else AccessLevel.PRIVATE
