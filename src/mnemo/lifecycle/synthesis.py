"""Writing one memory out of several with a language model (consolidation's ``ai_synthesis``).

A ``Synthesizer`` is any callable that turns the memories' contents (and the caller's instructions)
into one text. mnemo has two: ``ChatSynthesizer`` asks an OpenAI-compatible chat completions API
the user configured (Ollama, vLLM, llama.cpp's server, OpenAI), and the ``full`` profile can wrap
MCP sampling when the client on a connection offers it. Every failure is ``OperationFailed``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mnemo.embed.http_json import api_url, post_json
from mnemo.errors import OperationFailed
from mnemo.lifecycle.settings import SynthesisEndpoint

Synthesizer = Callable[[Sequence[str], str | None], str]

SYSTEM_PROMPT = (
    "You merge notes an assistant keeps about its user into one note. Keep every fact, name, number, "
    "date and preference the notes state; where they disagree, keep the newest (the notes are oldest "
    "first). Do not add anything they do not say. Answer with the merged note only, as plain text."
)
MAX_TOKENS = 1_000


def prompt(contents: Sequence[str], instructions: str | None) -> str:
    notes = "\n".join(f"{n}. {content}" for n, content in enumerate(contents, start=1))
    extra = f"\n\nInstructions: {instructions}" if instructions else ""
    return f"Notes, oldest first:\n{notes}{extra}"


class ChatSynthesizer:
    def __init__(self, endpoint: SynthesisEndpoint) -> None:
        self.endpoint = endpoint
        self.url = api_url(endpoint.url, "chat/completions")

    def __call__(self, contents: Sequence[str], instructions: str | None) -> str:
        body = {
            "model": self.endpoint.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": prompt(contents, instructions)},
            ],
            "max_tokens": MAX_TOKENS,
            "temperature": 0,
        }
        answer = post_json(
            self.url, body, api_key=self.endpoint.api_key, timeout_s=self.endpoint.timeout_s, failure=_failed
        )
        return merged_text(answer, self.url)


def merged_text(answer: Any, source: str) -> str:
    """The text of a chat completion's first choice; refused when there is none."""
    try:
        text = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as error:
        raise OperationFailed(f"synthesis by {source} answered without choices[0].message.content") from error
    if not isinstance(text, str) or not text.strip():
        raise OperationFailed(f"synthesis by {source} answered with no text")
    return text.strip()


def _failed(message: str, **details: Any) -> OperationFailed:
    return OperationFailed(f"synthesis failed: {message}", **details)
