"""Automatic memory for coding agents (Claude Code, Codex CLI, Cursor, Gemini CLI), through their hooks.

``client`` is the hook command (standard library only: bound, redact, queue, ask), ``spool`` its
durable queue and the capture process's socket, ``switch`` the folders where hooks are off;
``daemon`` is the capture process and ``runner`` one hook call against the store. ``clients``
reads each client's payloads into ``payload``'s normalized call and writes its output; ``capture``
decides what is worth keeping (rules, no model), ``redact`` takes secrets and private spans out,
``inject`` chooses what the agent is shown, ``state`` keeps a session's notes between calls, and
``install`` merges mnemo's hooks and MCP server into each client's configuration.
"""
