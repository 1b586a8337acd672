"""A plain numpy forward pass of a sentence-transformers BERT or MPNet model, to check the ONNX graphs.

Written from Hugging Face's ``modeling_bert`` / ``modeling_mpnet`` and sentence-transformers'
Pooling + Normalize, step by step and in float64, independently of ``mnemo.embed.onnx_graph``
(which folds tables and slices precomputed buckets): the tests compare the two on random weights,
and the same comparison ran once on all-mpnet-base-v2's real weights. Slow: test code, not shipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from mnemo.embed.onnx_graph import BertConfig

Array = npt.NDArray[Any]


def _bucket(relative_position: int, num_buckets: int, max_distance: int = 128) -> int:
    """``MPNetEncoder.relative_position_bucket`` for one ``key - query`` distance."""
    n = -relative_position
    half = num_buckets // 2
    bucket = half if n < 0 else 0
    n = abs(n)
    max_exact = half // 2
    if n < max_exact:
        return bucket + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (half - max_exact))
    return bucket + min(large, half - 1)


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


def _linear(w: Mapping[str, Array], prefix: str, x: Array) -> Array:
    return x @ w[prefix + "weight"].astype(np.float64).T + w[prefix + "bias"]


def _gelu(x: Array) -> Array:
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def sentence_vectors(weights: Mapping[str, Array], config: BertConfig, ids: Array, mask: Array) -> Array:
    """Unit sentence vectors [batch, hidden] for token ids and attention mask [batch, sequence]."""
    w = {name: np.asarray(value, dtype=np.float64) for name, value in weights.items() if "position_ids" not in name}
    batch, length = ids.shape
    heads, size = config.num_heads, config.hidden_size // config.num_heads
    eps = config.layer_norm_eps
    if config.mpnet:
        # create_position_ids_from_input_ids: cumsum over the non-padding tokens, + padding_idx (1)
        positions = np.cumsum(mask, axis=1) * mask + 1
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions]
    else:
        positions = np.broadcast_to(np.arange(length), (batch, length))
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][positions]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)

    bias = (1.0 - mask[:, None, None, :]) * np.finfo(np.float32).min  # [B, 1, 1, S]
    if config.mpnet:
        buckets = np.array([[_bucket(j - i, config.relative_buckets) for j in range(length)] for i in range(length)])
        position_bias = w["encoder.relative_attention_bias.weight"][buckets]  # [S, S, heads]
        bias = bias + position_bias.transpose(2, 0, 1)[None]

    def split(t: Array) -> Array:
        return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

    for layer in range(config.num_layers):
        p = f"encoder.layer.{layer}."
        if config.mpnet:
            q, k, v = "attention.attn.q.", "attention.attn.k.", "attention.attn.v."
            o, norm = "attention.attn.o.", "attention.LayerNorm."
        else:
            q, k, v = "attention.self.query.", "attention.self.key.", "attention.self.value."
            o, norm = "attention.output.dense.", "attention.output.LayerNorm."
        scores = split(_linear(w, p + q, x)) @ split(_linear(w, p + k, x)).transpose(0, 1, 3, 2) / math.sqrt(size)
        scores = scores + bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probabilities = scores / scores.sum(axis=-1, keepdims=True)
        context = (probabilities @ split(_linear(w, p + v, x))).transpose(0, 2, 1, 3).reshape(batch, length, -1)
        x = _layer_norm(_linear(w, p + o, context) + x, w[p + norm + "weight"], w[p + norm + "bias"], eps)
        hidden = _gelu(_linear(w, p + "intermediate.dense.", x))
        out = _linear(w, p + "output.dense.", hidden)
        x = _layer_norm(out + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)

    kept = mask[:, :, None].astype(np.float64)
    pooled = (x * kept).sum(axis=1) / np.maximum(kept.sum(axis=1), 1e-9)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
