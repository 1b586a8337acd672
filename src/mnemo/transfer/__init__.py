"""Bulk import and export: ``mnemo import`` / ``mnemo export``."""
