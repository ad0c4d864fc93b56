"""The Anthropic messages API through the official ``anthropic`` client (extra ``anthropic``).

The key comes from ``ANTHROPIC_API_KEY`` (or the client's own configuration); ``@BASE_URL`` or
``ANTHROPIC_BASE_URL`` points it elsewhere. ``reasoning_effort`` (only when set) turns on
extended thinking with a budget of 1k/4k/16k tokens for low/medium/high; the thinking itself is
not part of the response.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from freshness_magic.backends.base import (
    ModelBackend,
    StreamEnd,
    client_module,
    is_json_response,
    reply_from_text,
)
from freshness_magic.engine.handlers.llm import BackendReply, BackendRequest
from freshness_magic.engine.model import Node
from freshness_magic.errors import BackendError

KEY_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""The client's key (``x-api-key``) or bearer token: one of them must be set."""
MAX_TOKENS = 4096
THINKING_BUDGET = {"low": 1024, "medium": 4096, "high": 16384}


class AnthropicBackend(ModelBackend):
    """``anthropic:MODEL[@BASE_URL]``."""

    name = "anthropic"

    def _client_for(self, base_url: str | None) -> Any:
        anthropic = client_module("anthropic")
        try:
            return anthropic.Anthropic(base_url=base_url, max_retries=0)
        except anthropic.AnthropicError as exc:
            raise BackendError(
                f"anthropic: {' '.join(str(exc).split())} (set ANTHROPIC_API_KEY)"
            ) from None

    def missing_credentials(self) -> tuple[str, ...]:
        """``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``), unless one is set."""
        if any(os.environ.get(name) for name in KEY_VARS):
            return ()
        return KEY_VARS

    def _classify(self, exc: Exception) -> Exception:
        """As the base class; the client's "Could not resolve authentication method" (a
        TypeError when it has no key) says which variable to set, as the OpenAI backend does."""
        if isinstance(exc, TypeError) and "authentication method" in str(exc):
            return BackendError(
                "anthropic: no API key (set ANTHROPIC_API_KEY, or ANTHROPIC_AUTH_TOKEN for a "
                "bearer token)"
            )
        return super()._classify(exc)

    def _options(
        self, model: str, prompt: str, request: BackendRequest | None = None
    ) -> dict[str, Any]:
        """The request body: the carried context as the system text and the thread's earlier
        messages before the prompt (:class:`BackendRequest`), or the prompt alone."""
        options: dict[str, Any] = {
            "model": model,
            "max_tokens": MAX_TOKENS,
            "messages": [{"role": "user", "content": prompt}],
        }
        if request is not None:
            options["messages"] = request.messages()
            if request.system():
                options["system"] = request.system()
        budget = THINKING_BUDGET.get(self.config.reasoning_effort)
        if budget:
            options["thinking"] = {"type": "enabled", "budget_tokens": budget}
            options["max_tokens"] = MAX_TOKENS + budget
        return options

    def _stream(
        self, request: BackendRequest, model: str, sink: Callable[[str], None]
    ) -> StreamEnd:
        """The answer's text deltas into ``sink``. It is complete only with ``message_stop``
        (or a ``stop_reason``); a server that ignores ``stream=true`` and answers one JSON
        message is read as that."""
        remaining = request.remaining()
        stream = self.client().messages.create(
            **self._options(model, request.prompt, request),
            stream=True,
            **({"timeout": remaining} if remaining is not None else {}),
        )
        request.add_closer(stream.close)
        end = StreamEnd(usage={"input_tokens": 0, "output_tokens": 0}, missing="message_stop")
        try:
            if is_json_response(stream.response):
                return _json_answer(json.loads(stream.response.read()), sink, end)
            for event in stream:
                if request.cancel.is_set():
                    break
                if event.type == "message_start":
                    end.model = event.message.model or end.model
                    end.usage["input_tokens"] = int(event.message.usage.input_tokens or 0)
                elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                    sink(event.delta.text)
                elif event.type == "message_delta":
                    if event.usage is not None:
                        end.usage["output_tokens"] = int(event.usage.output_tokens or 0)
                    end.ended = end.ended or bool(getattr(event.delta, "stop_reason", None))
                elif event.type == "message_stop":
                    end.ended = True
        finally:
            stream.close()
        return end

    def _complete(self, node: Node, prompt: str, model: str) -> BackendReply:
        message = self.client().messages.create(**self._options(model, prompt))
        if not message.stop_reason:
            raise BackendError(
                f"{self.describe()}: the answer was cut off: it came without a stop_reason"
            )
        text = "".join(getattr(block, "text", "") for block in message.content)
        usage = {
            "input_tokens": int(message.usage.input_tokens or 0),
            "output_tokens": int(message.usage.output_tokens or 0),
        }
        return reply_from_text(text, message.model or model, usage)


def _json_answer(body: Any, sink: Callable[[str], None], end: StreamEnd) -> StreamEnd:
    """A plain message given to a streamed request: its text at once; complete with its
    ``stop_reason``."""
    if not isinstance(body, dict) or body.get("type") == "error":
        error = body.get("error") if isinstance(body, dict) else None
        message = error.get("message") if isinstance(error, dict) else "not a message"
        raise BackendError(f"the server answered the streamed request with {message}")
    for block in body.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text" and block.get("text"):
            sink(str(block["text"]))
    usage = body.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    end.model = str(body.get("model") or "")
    end.usage = {
        "input_tokens": int(usage.get("input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
    }
    end.ended = bool(body.get("stop_reason"))
    end.missing = "a stop_reason"
    return end
