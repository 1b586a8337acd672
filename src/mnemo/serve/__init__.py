"""Transports that carry MCP to and from mnemo's servers."""
