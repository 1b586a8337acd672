"""Clients mnemo did not write, over HTTP: the official MCP Inspector CLI and the MCP conformance suite.

They come from npm, into the folder ``MNEMO_NODE_TOOLS`` names (``.ci/run`` installs them there
with a Node 22 they need: see the README). Without that folder these tests are skipped, except
under CI, where their absence is a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from http_server import serving
from mnemo.access.caller import Role
from mnemo.access.keys import KeyRing

# The server scenarios that apply to a server without the suite's fixture tools, resources and
# prompts (tools-call-*, resources-*, prompts-*, completion, elicitation and sse-polling call
# fixtures by name; logging-set-level asks for logging, which mnemo does not offer: 2026-07-28
# deprecates it).
CONFORMANCE_SCENARIOS = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection",
                         "server-sse-multiple-streams"]  # fmt: skip


@pytest.fixture(scope="module")
def node_tools() -> Path:
    folder = os.environ.get("MNEMO_NODE_TOOLS")
    if not folder or not (Path(folder) / "node_modules").is_dir():
        if os.environ.get("CI"):
            pytest.fail("MNEMO_NODE_TOOLS must name the folder .ci/run installs the MCP Inspector and conformance in")
        pytest.skip("MNEMO_NODE_TOOLS is not set: the MCP Inspector and conformance suite are not installed")
    return Path(folder) / "node_modules"


def node(tools: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tools / ".bin" / "node"), str(tools / script), *args], capture_output=True, text=True,
                          timeout=180)  # fmt: skip


def test_the_mcp_inspector_cli_lists_and_calls_tools_with_a_key(node_tools: Path, tmp_path: Path):
    home = tmp_path / "home"
    _, key = KeyRing(home).create("alice", Role.MEMBER)
    inspector = "@modelcontextprotocol/inspector/cli/build/cli.js"
    with serving(home, MNEMO_EMBEDDER="none") as server:
        common = ["--cli", server.url, "--transport", "http", "--header", f"X-API-Key: {key}"]
        listed = node(node_tools, inspector, *common, "--method", "tools/list")
        assert listed.returncode == 0, listed.stderr
        assert "recall_memories" in {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
        called = node(node_tools, inspector, *common, "--method", "tools/call", "--tool-name", "store_memory",
                      "--tool-arg", "content=The Inspector stored this")  # fmt: skip
        assert called.returncode == 0, called.stderr
        assert json.loads(called.stdout)["structuredContent"]["success"] is True
        refused = node(node_tools, inspector, "--cli", server.url, "--transport", "http", "--method", "tools/list")
        assert refused.returncode != 0  # no key: 401


@pytest.mark.parametrize("scenario", CONFORMANCE_SCENARIOS)
def test_the_conformance_suites_server_scenarios_pass(node_tools: Path, tmp_path: Path, scenario: str):
    with serving(tmp_path / "home", MNEMO_EMBEDDER="none") as server:  # no key: the suite sends none
        done = node(node_tools, "@modelcontextprotocol/conformance/dist/index.js", "server", "--url", server.url,
                    "--scenario", scenario)  # fmt: skip
    passed = re.search(r"Passed: (\d+)/(\d+), (\d+) failed", done.stdout)
    assert passed is not None, done.stdout + done.stderr
    assert passed.group(1) == passed.group(2) and passed.group(3) == "0", done.stdout
