"""Facts of spec 004 that tests check the server against, written as the spec gives them."""

METRICS = [
    "count",
    "storage_size",
    "category_distribution",
    "importance_distribution",
    "access_patterns",
    "growth_rate",
    "recall_frequency",
    "consolidation_rate",
    "deletion_rate",
    "health_score",
]
