"""The FakeEmbedder that fast tests rely on keeps the Embedder contract."""

from __future__ import annotations

import numpy as np

from mnemo.embed.fake import FakeEmbedder


def test_the_same_text_always_gets_the_same_vector_even_across_instances() -> None:
    first = FakeEmbedder().embed_query("Emma prefers oat milk")
    second = FakeEmbedder().embed_documents(["something else", "Emma prefers oat milk"])[1]

    np.testing.assert_array_equal(first, second)


def test_vectors_are_float32_unit_length_rows_of_the_given_dimension() -> None:
    embedder = FakeEmbedder(dimension=32)

    vectors = embedder.embed_documents(["one text", "another, longer text about deployments", "x"])

    assert embedder.dimension == 32
    assert vectors.shape == (3, 32)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert embedder.embed_query("one text").shape == (32,)


def test_texts_that_share_words_are_closer_than_texts_that_do_not() -> None:
    embedder = FakeEmbedder()
    query, near, far = embedder.embed_documents(
        ["coffee with oat milk", "Emma drinks her coffee with oat milk", "the billing service deploys on Fridays"]
    )

    assert float(query @ near) > float(query @ far)


def test_a_text_without_words_gets_a_zero_vector_rather_than_nan() -> None:
    vector = FakeEmbedder().embed_query("")

    assert not np.isnan(vector).any()
    assert not vector.any()


def test_the_name_carries_the_dimension_so_two_sizes_are_never_mixed() -> None:
    assert FakeEmbedder(64).name != FakeEmbedder(32).name
