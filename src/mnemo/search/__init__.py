"""Finding memories: the hybrid search of words and meaning (``searcher``), what it reads from a
query (``focus``, ``roles``, ``when``) and how it orders close results (``superseded``); the
near-duplicate check (``twins``, ``same_fact``); and the vector index, exact in memory
(``vector_index``) or, past ``vector_layers.GRAPH_FROM`` vectors, a snapshot on disk with an HNSW
graph (``vector_graph``) plus the newer vectors in memory (``vector_layers``)."""
