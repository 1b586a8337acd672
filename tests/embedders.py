"""Embedders for tests that need a model to fail or to be watched: the fake, with a twist."""

from __future__ import annotations

from collections.abc import Sequence

from mnemo.embed import Vectors
from mnemo.embed.fake import FakeEmbedder


class FlakyEmbedder(FakeEmbedder):
    """Fails while ``broken`` is set, like a model server that went away."""

    broken = False

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if self.broken:
            raise RuntimeError("model server unreachable")
        return super().embed_documents(texts)
