"""One JSON POST to an OpenAI-compatible server, with the standard library (no HTTP dependency).

Used by the HTTP embedder and by consolidation's chat synthesis; each turns a failure into its
own error through ``failure``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from mnemo import __version__
from mnemo.errors import MnemoError

ERROR_BODY_CHARS = 300  # how much of a server's error body an error quotes


def post_json(
    url: str, body: dict[str, Any], *, api_key: str | None, timeout_s: float, failure: Callable[..., MnemoError]
) -> Any:
    """The parsed JSON answer; ``failure(message, **details)`` for every way it can go wrong."""
    headers = {"Content-Type": "application/json", "User-Agent": f"mnemo/{__version__}"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            raw = response.read()
    except urllib.error.HTTPError as error:  # before URLError: it is one
        detail = error.read()[:ERROR_BODY_CHARS].decode(errors="replace").strip()
        raise failure(f"server at {url} answered {error.code}: {detail or error.reason}", url=url,
                      status=error.code) from error  # fmt: skip
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise failure(f"server at {url} could not be reached ({reason})", url=url) from error
    try:
        return json.loads(raw)
    except ValueError as error:
        raise failure(f"server at {url} did not answer JSON", url=url) from error


def api_url(base_url: str, path: str) -> str:
    """``{base_url}/v1/{path}``, also when the base URL already ends in ``/v1`` (as OpenAI's own does)."""
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return f"{base}/v1/{path}"
