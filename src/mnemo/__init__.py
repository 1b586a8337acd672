"""mnemo: a memory server for AI agents."""

import os
import sys

__version__ = "0.1.0"

# OpenBLAS's worker threads spin on a core after every product, waiting for more: each recall's
# product of one query with the store's vectors left a core busy, which doubled a recall's CPU (35
# to 17 ms at 10,000 memories on 2 cores) and slowed what ran beside it (the query's embedding, the
# next request). One thread is enough for such a product. Only a default, and only when numpy is
# first imported after mnemo: a program that sets the variable, or imported numpy first, keeps its own.
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
