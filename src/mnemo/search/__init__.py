"""Finding memories: the hybrid search of words and meaning (``searcher``) and the vector index it
reads, exact in memory (``vector_index``) or, past ``vector_layers.GRAPH_FROM`` vectors, a snapshot
on disk with an HNSW graph (``vector_graph``) plus the newer vectors in memory (``vector_layers``)."""
