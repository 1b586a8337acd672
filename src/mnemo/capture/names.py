"""The names ``mnemo hook EVENT --client NAME`` takes: constants only, no imports.

The hook command's fast path (``client.py``) checks its arguments against them; ``payload``,
``clients`` and ``runner`` read the same ones. Nothing here may import anything: the fast path
imports this module at every tool call.
"""

# The `mnemo hook` events, and the Claude Code events they stand for (each client's own names for
# them are in ``clients.py``).
EVENTS = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "post-tool-use": "PostToolUse",
    "post-tool-use-failure": "PostToolUseFailure",
    "stop": "Stop",
    "session-end": "SessionEnd",
    "pre-compact": "PreCompact",
}

# The coding agents whose hooks mnemo reads (``clients.CLIENTS`` has one reader for each).
CLIENT_NAMES = ("claude-code", "codex", "cursor", "gemini")
