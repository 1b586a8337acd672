"""The ONNX graph of a sentence-transformers BERT or MPNet model, built from its safetensors.

all-MiniLM-L6-v2 is a BERT encoder (word + position + token-type embeddings, LayerNorm, N layers
of multi-head self-attention and a GELU feed-forward block) followed by attention-masked mean
pooling and L2 normalisation. all-mpnet-base-v2 is an MPNet encoder, the same but for three
things (Hugging Face's ``modeling_mpnet``): no token-type embeddings; position ids that start at
``padding_idx + 1`` = 2 (``create_position_ids_from_input_ids``; with right padding the real tokens
are at 2 … n + 1); and a relative position bias added to every layer's attention scores, one
learnt value per head and bucket of ``key position - query position`` (T5-style buckets: 16 per
direction, exact up to 8, logarithmic up to 128). The buckets depend only on the sequence length,
so the graph holds them for every pair of positions and slices them to the batch's length.

This module writes exactly that with ``onnx.helper``, so no PyTorch is needed to export it. Only
``mnemo setup`` uses it: ``onnx`` is imported inside the functions that need it, and serving
never loads it.

The graph takes ``input_ids`` and ``attention_mask`` (int64, ``[batch, sequence]``) and returns
``embedding`` (float32, ``[batch, hidden]``, unit length). Token types are always 0 for single
sentences, so the type-0 row is folded into the position table instead of being a third input.

With ``int8=True`` every weight matrix becomes onnxruntime's ``MatMulNBits`` (8-bit weights in
blocks of ``INT8_BLOCK_SIZE`` along the input axis, one scale per block; ``accuracy_level`` 4, so
activations are quantised to int8 per row and block as well). ``quantize_dynamic`` was measured
first and lost too much: per-channel weights but one activation scale per whole batch tensor put
short texts at cosine 0.958 to the reference, and made a text's vector depend on the other texts
in its batch (cosine 0.945 between the same text alone and batched). Per-block activation scales
have neither fault: 0.994 at worst, the same vector alone or batched.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import onnx

Array = npt.NDArray[Any]

OPSET = 17  # the first with LayerNormalization; every onnxruntime of the last years runs it
IR_VERSION = 8  # the IR version that goes with opset 17; newer onnx writes newer by default
INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
OUTPUT = "embedding"
INT8_BLOCK_SIZE = 128
INT8_ACCURACY_LEVEL = 4  # MatMulNBits computes with int8 activations (per row and block)

_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


MPNET_POSITION_OFFSET = 2  # MPNet's padding_idx (1) + 1: the first real token's position id
MPNET_MAX_DISTANCE = 128  # relative_position_bucket's max_distance


@dataclass(frozen=True)
class BertConfig:
    """The sizes a BERT (or MPNet) graph needs, read from the model's ``config.json``."""

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_positions: int
    layer_norm_eps: float
    model_type: str = "bert"  # or "mpnet"
    relative_buckets: int = 0  # MPNet's relative_attention_num_buckets

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BertConfig:
        if data.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported activation {data['hidden_act']!r}: only exact GELU is built")
        if data.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        model_type = str(data.get("model_type", "bert"))
        if model_type not in ("bert", "mpnet"):
            raise ValueError(f"unsupported model type {model_type!r}: only bert and mpnet are built")
        return cls(
            hidden_size=int(data["hidden_size"]),
            num_layers=int(data["num_hidden_layers"]),
            num_heads=int(data["num_attention_heads"]),
            intermediate_size=int(data["intermediate_size"]),
            max_positions=int(data["max_position_embeddings"]),
            layer_norm_eps=float(data["layer_norm_eps"]),
            model_type=model_type,
            relative_buckets=int(data.get("relative_attention_num_buckets", 32)) if model_type == "mpnet" else 0,
        )

    @property
    def mpnet(self) -> bool:
        return self.model_type == "mpnet"

    @property
    def max_tokens(self) -> int:
        """The longest input the position table covers."""
        return self.max_positions - MPNET_POSITION_OFFSET if self.mpnet else self.max_positions

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads


def read_safetensors(path: Path) -> dict[str, Array]:
    """Tensors of a ``.safetensors`` file by name.

    The format is an 8-byte little-endian header length, a JSON header mapping each name to its
    dtype, shape and byte range, then the raw little-endian buffers. Parsing it here spares a
    dependency for the one time setup reads it.
    """
    data = path.read_bytes()
    (header_length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_length])
    body = memoryview(data)[8 + header_length :]
    tensors: dict[str, Array] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path.name}: tensor {name} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        flat = np.frombuffer(body[start:end], dtype=np.dtype(dtype).newbyteorder("<"))
        tensors[name] = flat.reshape(info["shape"]).astype(dtype)  # a copy, so `data` can be freed
    return tensors


class _Graph:
    """Accumulates nodes and initializers; every node gets a fresh output name."""

    def __init__(self, *, int8: bool = False) -> None:
        from onnx import helper, numpy_helper

        self.int8 = int8
        self._helper = helper
        self._numpy_helper = numpy_helper
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._names: set[str] = set()
        self._count = 0

    def const(self, name: str, value: Array | float | list[int]) -> str:
        """An initializer; scalars become float32, lists of ints become int64 vectors."""
        if name in self._names:
            return name
        if isinstance(value, float):
            array = np.array(value, dtype=np.float32)
        elif isinstance(value, list):
            array = np.array(value, dtype=np.int64)
        else:
            array = value
        self.initializers.append(self._numpy_helper.from_array(array, name))
        self._names.add(name)
        return name

    def op(self, op_type: str, *inputs: str, output: str | None = None, domain: str = "", **attributes: Any) -> str:
        """Adds a node and returns the name of its output (``output`` if given)."""
        self._count += 1
        output = output or f"{op_type}_{self._count}"
        name = f"n{self._count}_{op_type}"
        node = self._helper.make_node(op_type, list(inputs), [output], name=name, domain=domain, **attributes)
        self.nodes.append(node)
        return output


def build_model(weights: Mapping[str, Array], config: BertConfig, *, int8: bool = False) -> onnx.ModelProto:
    """The whole sentence-embedding graph: encoder, mean pooling, L2 normalisation; with
    ``int8`` its linear layers use 8-bit weights (the embedding tables stay float32)."""
    from onnx import TensorProto, checker, helper

    g = _Graph(int8=int8)
    x = _embeddings(g, weights, config)
    mask = g.op("Cast", ATTENTION_MASK, to=TensorProto.FLOAT)  # [B, S]
    attention_bias = _attention_bias(g, mask)
    if config.mpnet:  # [B, 1, 1, S] + [1, heads, S, S]: one bias for every layer, as MPNetEncoder
        attention_bias = g.op("Add", attention_bias, _relative_position_bias(g, weights, config))
    for layer in range(config.num_layers):
        x = _encoder_layer(g, weights, config, f"encoder.layer.{layer}.", x, attention_bias)
    pooled = _mean_pool(g, x, mask)
    _l2_normalise(g, pooled, OUTPUT)

    graph = helper.make_graph(
        g.nodes,
        f"sentence_{config.model_type}",
        inputs=[
            helper.make_tensor_value_info(INPUT_IDS, TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info(ATTENTION_MASK, TensorProto.INT64, ["batch", "sequence"]),
        ],
        outputs=[helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", config.hidden_size])],
        initializer=g.initializers,
    )
    contrib = sorted({node.domain for node in g.nodes if node.domain})  # com.microsoft, for MatMulNBits
    opsets = [helper.make_opsetid("", OPSET), *(helper.make_opsetid(domain, 1) for domain in contrib)]
    model = helper.make_model(graph, producer_name="mnemo", opset_imports=opsets)
    model.ir_version = IR_VERSION
    checker.check_model(model)
    return model


def _linear_weight(weights: Mapping[str, Array], prefix: str) -> Array:
    """PyTorch stores Linear weights as [out, in]; MatMul wants [in, out]."""
    return np.ascontiguousarray(weights[prefix + "weight"].T)


def _linear(g: _Graph, weights: Mapping[str, Array], prefix: str, x: str) -> str:
    b = g.const(prefix + "bias", weights[prefix + "bias"])
    if g.int8:
        return g.op("Add", _matmul_8bit(g, prefix, x, _linear_weight(weights, prefix)), b)
    w = g.const(prefix + "weight.T", _linear_weight(weights, prefix))
    return g.op("Add", g.op("MatMul", x, w), b)


def _matmul_8bit(g: _Graph, prefix: str, x: str, weight: Array) -> str:
    k, n = weight.shape
    packed, scales = quantise_blocks_8bit(weight, INT8_BLOCK_SIZE)
    return g.op(
        "MatMulNBits",
        x,
        g.const(prefix + "weight.q8", packed),
        g.const(prefix + "weight.scales", scales),
        domain="com.microsoft",
        K=k,
        N=n,
        bits=8,
        block_size=INT8_BLOCK_SIZE,
        accuracy_level=INT8_ACCURACY_LEVEL,
    )


def quantise_blocks_8bit(weight: Array, block_size: int) -> tuple[Array, Array]:
    """A [K, N] float matrix as MatMulNBits wants it, symmetric, with no zero-point input.

    Returns the codes, uint8 [N, K / block, block], and the scales, float32 [N, K / block]:
    column n's block j holds rows j·block … j·block + block - 1, stored as q + 128 with
    w ≈ q · scale. The scale is the block's largest-magnitude value (sign kept) over -128, so
    that value maps to -128 exactly, as onnxruntime's own quantiser does.
    """
    k, n = weight.shape
    if k % block_size:
        raise ValueError(f"input size {k} is not a multiple of the block size {block_size}")
    blocks = weight.T.reshape(n, k // block_size, block_size).astype(np.float32)
    extreme = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=-1)[..., None], axis=-1)
    scales = extreme / -128.0
    scales[scales == 0] = 1.0  # an all-zero block: any scale codes it as zeros
    codes = np.clip(np.rint(blocks / scales), -128, 127) + 128
    return codes.astype(np.uint8), scales[..., 0].astype(np.float32)


def _layer_norm(g: _Graph, weights: Mapping[str, Array], prefix: str, x: str, eps: float) -> str:
    scale = g.const(prefix + "weight", weights[prefix + "weight"])
    bias = g.const(prefix + "bias", weights[prefix + "bias"])
    return g.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=eps)


def _embeddings(g: _Graph, weights: Mapping[str, Array], config: BertConfig) -> str:
    word_table = g.const("embeddings.word_embeddings.weight", weights["embeddings.word_embeddings.weight"])
    if config.mpnet:  # no token types; row i is position id i + 2 (see the module's docstring)
        positions = weights["embeddings.position_embeddings.weight"][MPNET_POSITION_OFFSET:]
    else:
        # Position and token-type-0 rows added once here, so the graph needs neither position ids
        # nor token type ids: row i is the embedding of position i with type 0.
        positions = (
            weights["embeddings.position_embeddings.weight"] + weights["embeddings.token_type_embeddings.weight"][0]
        )
    position_table = g.const("embeddings.position_and_type", positions.astype(np.float32))
    words = g.op("Gather", word_table, INPUT_IDS)  # [B, S, H]
    length = g.op("Shape", INPUT_IDS, start=1, end=2)  # [S]
    zero = g.const("zero_i64", [0])
    position_rows = g.op("Slice", position_table, zero, length, zero)  # rows 0..S-1 of axis 0
    x = g.op("Add", words, position_rows)
    return _layer_norm(g, weights, "embeddings.LayerNorm.", x, config.layer_norm_eps)


def _attention_bias(g: _Graph, mask: str) -> str:
    """[B, 1, 1, S]: 0 where a token may be attended to, a huge negative number at padding,
    as Hugging Face's BERT does (it uses the dtype's minimum)."""
    one = g.const("one", 1.0)
    lowest = g.const("lowest_f32", float(np.finfo(np.float32).min))
    bias = g.op("Mul", g.op("Sub", one, mask), lowest)
    return g.op("Unsqueeze", bias, g.const("axes_1_2", [1, 2]))


def relative_position_buckets(length: int, num_buckets: int, max_distance: int = MPNET_MAX_DISTANCE) -> Array:
    """[length, length] int64: MPNet's bucket of each (query i, key j), ``relative_position_bucket``
    of ``j - i``. Computed in float32 like the reference, so the bucket edges fall the same way."""
    positions = np.arange(length)
    n = -(positions[None, :] - positions[:, None])  # i - j
    half = num_buckets // 2
    buckets = np.where(n < 0, half, 0)
    n = np.abs(n)
    max_exact = half // 2
    small = n < max_exact
    ratio = np.where(small, max_exact, n).astype(np.float32) / np.float32(max_exact)  # log(0) never taken
    scaled = np.log(ratio) / np.float32(math.log(max_distance / max_exact)) * np.float32(half - max_exact)
    large = np.minimum(max_exact + scaled.astype(np.int64), half - 1)
    return (buckets + np.where(small, n, large)).astype(np.int64)


def _relative_position_bias(g: _Graph, weights: Mapping[str, Array], config: BertConfig) -> str:
    """[1, heads, S, S]: the learnt bias of each head for each (query, key) pair's bucket."""
    table = g.const("encoder.relative_attention_bias.weight", weights["encoder.relative_attention_bias.weight"])
    all_buckets = g.const("relative_buckets", relative_position_buckets(config.max_tokens, config.relative_buckets))
    length = g.op("Shape", INPUT_IDS, start=1, end=2)  # [S]
    axes = g.const("axes_0_1", [0, 1])
    ends = g.op("Concat", length, length, axis=0)
    buckets = g.op("Slice", all_buckets, g.const("zeros_2", [0, 0]), ends, axes)  # [S, S]
    values = g.op("Gather", table, buckets)  # [S, S, heads]
    return g.op("Unsqueeze", g.op("Transpose", values, perm=[2, 0, 1]), g.const("axis_0", [0]))


def _heads(g: _Graph, x: str, config: BertConfig, perm: list[int]) -> str:
    """[B, S, H] → [B, S, heads, head_size] → transposed by ``perm``."""
    shape = g.const("heads_shape", [0, 0, config.num_heads, config.head_size])  # 0 keeps that dim
    return g.op("Transpose", g.op("Reshape", x, shape), perm=perm)


def layer_names(config: BertConfig) -> dict[str, str]:
    """Where each part of an encoder layer is in the weights, under ``encoder.layer.N.``."""
    if config.mpnet:
        return {
            "query": "attention.attn.q.",
            "key": "attention.attn.k.",
            "value": "attention.attn.v.",
            "attention_out": "attention.attn.o.",
            "attention_norm": "attention.LayerNorm.",
        }
    return {
        "query": "attention.self.query.",
        "key": "attention.self.key.",
        "value": "attention.self.value.",
        "attention_out": "attention.output.dense.",
        "attention_norm": "attention.output.LayerNorm.",
    }


def _self_attention(
    g: _Graph, weights: Mapping[str, Array], config: BertConfig, prefix: str, x: str, attention_bias: str
) -> str:
    names = layer_names(config)
    query = _heads(g, _linear(g, weights, prefix + names["query"], x), config, [0, 2, 1, 3])  # [B, h, S, d]
    key = _heads(g, _linear(g, weights, prefix + names["key"], x), config, [0, 2, 3, 1])  # [B, h, d, S]
    value = _heads(g, _linear(g, weights, prefix + names["value"], x), config, [0, 2, 1, 3])  # [B, h, S, d]
    scale = g.const("attention_scale", math.sqrt(config.head_size))
    scores = g.op("Add", g.op("Div", g.op("MatMul", query, key), scale), attention_bias)
    probabilities = g.op("Softmax", scores, axis=-1)
    context = g.op("Transpose", g.op("MatMul", probabilities, value), perm=[0, 2, 1, 3])  # [B, S, h, d]
    merged = g.op("Reshape", context, g.const("merge_shape", [0, 0, config.hidden_size]))
    return _linear(g, weights, prefix + names["attention_out"], merged)


def _gelu(g: _Graph, x: str) -> str:
    """Exact GELU, x · ½ · (1 + erf(x / √2)), as BERT's "gelu"; onnxruntime fuses it."""
    sqrt2 = g.const("sqrt2", math.sqrt(2.0))
    half = g.const("half", 0.5)
    one = g.const("one", 1.0)
    return g.op("Mul", g.op("Mul", x, half), g.op("Add", one, g.op("Erf", g.op("Div", x, sqrt2))))


def _encoder_layer(
    g: _Graph, weights: Mapping[str, Array], config: BertConfig, prefix: str, x: str, attention_bias: str
) -> str:
    eps = config.layer_norm_eps
    attended = _self_attention(g, weights, config, prefix, x, attention_bias)
    x = _layer_norm(g, weights, prefix + layer_names(config)["attention_norm"], g.op("Add", attended, x), eps)
    hidden = _gelu(g, _linear(g, weights, prefix + "intermediate.dense.", x))
    out = _linear(g, weights, prefix + "output.dense.", hidden)
    return _layer_norm(g, weights, prefix + "output.LayerNorm.", g.op("Add", out, x), eps)


def _mean_pool(g: _Graph, x: str, mask: str) -> str:
    """Mean of the token vectors that the mask keeps, as sentence-transformers' Pooling does
    (with its clamp of the token count at 1e-9)."""
    axis1 = g.const("axis_1", [1])
    mask3 = g.op("Unsqueeze", mask, g.const("axis_2", [2]))  # [B, S, 1]
    summed = g.op("ReduceSum", g.op("Mul", x, mask3), axis1, keepdims=0)  # [B, H]
    count = g.op("Max", g.op("ReduceSum", mask3, axis1, keepdims=0), g.const("count_floor", 1e-9))  # [B, 1]
    return g.op("Div", summed, count)


def _l2_normalise(g: _Graph, x: str, output: str) -> None:
    """x / max(‖x‖, 1e-12), as torch.nn.functional.normalize; writes the graph's output."""
    norm = g.op("Max", g.op("ReduceL2", x, axes=[1], keepdims=1), g.const("norm_floor", 1e-12))
    g.op("Div", x, norm, output=output)
