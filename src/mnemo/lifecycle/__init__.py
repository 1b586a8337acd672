"""Spec 004's lifecycle of memories: consolidate, archive into tiers, restore.

Each operation family is a module of its own that builds on ``MemoryService``; the service does
not import them, so the dependency points one way (profiles → lifecycle → service).
"""
