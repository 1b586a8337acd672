"""The local embedder: all-MiniLM-L6-v2 (or all-mpnet-base-v2) run by onnxruntime on the CPU, with no network.

``mnemo setup`` (``mnemo.embed.model_setup``) puts the tokenizer and the ONNX graphs in the model
folder; this module only reads them. Building a ``LocalEmbedder`` is free: the tokenizer and the
onnxruntime session load on first use, or when ``load()`` is called (say, by a server warming
it on a background thread), once, under a lock. ``onnxruntime`` and ``tokenizers`` are imported
there too, so ``import mnemo`` stays fast.

Vectors match sentence-transformers' own to cosine ≥ 0.99999 (fp32); the int8 variant (8-bit
weights) stays within cosine 0.994 of them and runs about 1.5 times as fast on short texts
(tests/test_embed_local.py checks both; benchmarks/embedder_speed.py times them).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeAlias

from mnemo.embed import Vectors
from mnemo.embed.model_files import (
    MINILM,
    MODEL_NAME,
    TOKENIZER_FILE,
    ModelSpec,
    Variant,
    default_model_dir,
    installed_variants,
    model_spec,
    variant_file,
)
from mnemo.errors import EmbeddingError
from mnemo.lazy import import_now
from mnemo.lazy import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt
    import onnxruntime
    import tokenizers

DEFAULT_BATCH_SIZE = 64
# The most padded tokens one model run takes (texts x the longest one's tokens): 40-60 short notes
# to a run, about 20 conversation turns. The model alone on 2 cores, 4,000 texts, texts a second:
# LoCoMo's turns 219 given 64 at a time in runs of 64, 264 given 512 at a time, 316-324 given 512
# at a time in runs of 512-1,024 tokens; agent-memory's notes 563-599 and short synthetic notes
# 645-726 over budgets of 256 to 2,048 tokens, each set's best at 768-1,536. all-mpnet-base-v2,
# 1,500 texts given 512 at a time: LoCoMo's turns 44 without a budget, 52 with 1,024 tokens, 48
# with 2,048; the short notes 117-122 either way.
TOKENS_PER_RUN = 1024
# A model whose spec says so (one_thread_runs) runs each batch on one thread: a query or a stored
# memory on the caller's thread, the batches of bulk input (an import, a re-embedding) side by side,
# as many at once as ``threads``, on the same session (onnxruntime's run is thread-safe). A run
# split across two cores waits for the slower at every step of the graph. MiniLM on 2 cores
# (benchmarks/embedder_speed.py, two runs each way): a query alone 2.6 ms split (3.9 ms of CPU),
# 2.9 on one thread (2.9 of CPU); bulk input 481-483 texts/s side by side on a second one-thread
# session, kept after its first use (300-318 MB resident), 498-501 on the one (221-226 MB). A
# recall (latency.py) and a server under 8 clients (http_soak.py) were no different either way.
NOT_INSTALLED = "embedding model not installed; run `mnemo setup`"

Choice = Literal["auto", "int8", "fp32"]
TokenIds: TypeAlias = "npt.NDArray[np.int64]"


def default_threads() -> int:
    """All cores up to 4: a 6-layer model on short texts gains little from more, and the
    rest of the process (search, SQLite) keeps some room."""
    return max(1, min(4, os.cpu_count() or 1))


def load_tokenizer(path: Path, max_tokens: int = MINILM.max_tokens) -> tokenizers.Tokenizer:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    # tokenizer.json pads and truncates to a fixed 128; sentence-transformers truncates at the
    # model's max_seq_length (256 for MiniLM, 384 for MPNet) and pads each batch to its longest
    # text, and so do we (see _pad; the graphs read only the mask, never the padding's ids).
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


def open_session(path: Path, threads: int) -> onnxruntime.InferenceSession:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: a stdio server's stderr is the client's log
    # Spinning worker threads keep the cores busy between runs: they slowed numpy vector search
    # in the same process from 25 to 42 ms. Sleeping costs a few microseconds per run instead.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def _pad(rows: Sequence[list[int]]) -> tuple[TokenIds, TokenIds]:
    """Token ids and attention mask, padded with id 0 to the longest row."""
    width = max(len(row) for row in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return ids, mask


def _batches(lengths: Sequence[int], batch_size: int, tokens: int = TOKENS_PER_RUN) -> list[list[int]]:
    """Indexes of the texts grouped into batches, longest texts first.

    Every text in a batch is padded to the batch's longest, so a batch also ends where a text is
    under half as long as the batch's first: the padding then never doubles the work (one
    256-token text among 3-token ones would otherwise make them all cost 256 tokens). It also ends
    before it holds more than ``tokens`` padded tokens: long texts embed faster in fewer to a run
    (TOKENS_PER_RUN). And the more texts are given at once, the closer in length each batch's are.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    batches: list[list[int]] = []
    for i in order:
        batch = batches[-1] if batches else None
        if (
            batch is None
            or len(batch) == batch_size
            or 2 * lengths[i] < lengths[batch[0]]
            or (len(batch) + 1) * lengths[batch[0]] > tokens
        ):
            batches.append([i])
        else:
            batch.append(i)
    return batches


class OnnxSentenceModel:
    """A tokenizer and an onnxruntime session over one graph file: texts in, unit vectors out.

    Loads at once; ``LocalEmbedder`` adds the lazy loading and the choice of file.
    """

    def __init__(
        self,
        model_path: Path,
        tokenizer_path: Path,
        *,
        threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        spec: ModelSpec = MINILM,
    ) -> None:
        self._tokenizer = load_tokenizer(tokenizer_path, spec.max_tokens)
        self._threads = threads or default_threads()
        self._side_by_side = spec.one_thread_runs and self._threads > 1  # see one_thread_runs above
        self._session = open_session(model_path, 1 if spec.one_thread_runs else self._threads)
        self._batch_size = batch_size
        self._dimension = spec.dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        if not texts:
            return out
        token_ids = [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]
        runs = _batches([len(ids) for ids in token_ids], self._batch_size)

        def run(rows: list[int]) -> Vectors:
            return self._run(self._session, *_pad([token_ids[i] for i in rows]))

        if not self._side_by_side or len(runs) == 1:
            for rows in runs:
                out[rows] = run(rows)
            return out
        workers = min(self._threads, len(runs))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mnemo-embed") as pool:
            for rows, vectors in zip(runs, pool.map(run, runs), strict=True):
                out[rows] = vectors
        return out

    @staticmethod
    def _run(session: onnxruntime.InferenceSession, ids: TokenIds, mask: TokenIds) -> Vectors:
        try:
            (vectors,) = session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
        except Exception as error:  # onnxruntime raises its own exception types; map them once, here
            raise EmbeddingError(f"the embedding model failed: {error}") from error
        return np.asarray(vectors, dtype=np.float32)


def _choose(model_dir: Path, wanted: Choice, model: str = MODEL_NAME) -> Variant | None:
    """The installed variant to use: int8 if it was built and kept, else fp32, or the one asked;
    None when the folder holds no build of ``model``."""
    variants = installed_variants(model_dir, model)
    if wanted == "auto":
        return variants[0] if variants else None
    return wanted if wanted in variants else None


class LocalEmbedder:
    """A model ``mnemo setup`` installed: all-MiniLM-L6-v2 (384 dimensions, the default) or
    all-mpnet-base-v2 (768), from the files in ``model_dir`` (default: that model's own folder).

    ``variant``: "auto" uses int8 when setup built and kept it, else fp32; "int8" or "fp32" asks
    for one. A missing model raises ``EmbeddingError`` at load, not at construction.
    """

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        model: str = MODEL_NAME,
        variant: Choice = "auto",
        threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        self._spec = model_spec(model)
        self._model_dir = model_dir if model_dir is not None else default_model_dir(self._spec.name)
        self._wanted: Choice = variant
        self._threads = threads
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._model: OnnxSentenceModel | None = None
        self._variant: Variant | None = None

    @classmethod
    def available(cls, model_dir: Path | None = None, variant: Choice = "auto", model: str = MODEL_NAME) -> bool:
        """Whether the model files are installed, without loading or raising."""
        name = model_spec(model).name
        return _choose(model_dir if model_dir is not None else default_model_dir(name), variant, name) is not None

    @property
    def model_dir(self) -> Path:
        return self._model_dir

    @property
    def variant(self) -> Variant:
        """The variant loaded; before loading, the one that would be (fp32 if none is installed)."""
        if self._variant is not None:
            return self._variant
        if self._wanted != "auto":
            return self._wanted
        return _choose(self._model_dir, "auto", self._spec.name) or "fp32"

    @property
    def name(self) -> str:
        return f"{self._spec.name}/onnx-{self.variant}"

    @property
    def dimension(self) -> int:
        return self._spec.dimension

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        """Load the tokenizer and the session now; safe to call from any thread, and again."""
        self._loaded_model()

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._loaded_model().embed(texts)

    def embed_query(self, text: str) -> Vectors:
        return self.embed_documents([text])[0]

    def _loaded_model(self) -> OnnxSentenceModel:
        model = self._model
        if model is not None:
            return model
        with self._lock:  # one thread loads; the others wait for it and reuse its model
            if self._model is None:
                self._model = self._open()
            return self._model

    def _open(self) -> OnnxSentenceModel:
        import_now(np)  # before onnxruntime, which imports numpy too (see mnemo.lazy)
        variant = _choose(self._model_dir, self._wanted, self._spec.name)
        if variant is None:
            message = NOT_INSTALLED if self._spec is MINILM else f"{NOT_INSTALLED} --model {self._spec.name}"
            raise EmbeddingError(message, model_dir=str(self._model_dir), variant=self._wanted)
        try:
            model = OnnxSentenceModel(
                variant_file(self._model_dir, variant),
                self._model_dir / TOKENIZER_FILE,
                threads=self._threads,
                batch_size=self._batch_size,
                spec=self._spec,
            )
        except Exception as error:  # a damaged file surfaces as onnxruntime's or tokenizers' own error
            raise EmbeddingError(
                f"could not load the embedding model from {self._model_dir} ({error}); run `mnemo setup` again",
                model_dir=str(self._model_dir),
            ) from error
        self._variant = variant
        return model
