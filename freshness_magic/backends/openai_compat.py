"""OpenAI-compatible chat completions through the official ``openai`` client (extra ``openai``).

``base_url`` (from the spec's ``@URL``, else ``OPENAI_BASE_URL``) makes it serve Ollama, vLLM,
llama.cpp's server, LM Studio and hosted gateways. The key comes from ``OPENAI_API_KEY`` (or the
client's own configuration); with an explicit ``@URL`` and no key set, a placeholder is sent,
since local servers ask for none. Responses stream with ``include_usage`` so token counts arrive
in the last chunk.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from freshness_magic.backends.base import (
    ModelBackend,
    client_module,
    reply_from_text,
)
from freshness_magic.engine.handlers.llm import BackendReply, BackendRequest
from freshness_magic.engine.model import Node
from freshness_magic.errors import BackendError

LOCAL_PLACEHOLDER_KEY = "not-needed"


class OpenAIBackend(ModelBackend):
    """``openai:MODEL[@BASE_URL]``."""

    name = "openai"

    def _client_for(self, base_url: str | None) -> Any:
        openai = client_module("openai")
        api_key = None
        if base_url and not os.environ.get("OPENAI_API_KEY"):
            api_key = LOCAL_PLACEHOLDER_KEY
        try:
            return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0)
        except openai.OpenAIError as exc:
            raise BackendError(
                f"openai: {' '.join(str(exc).split())} (set OPENAI_API_KEY, or give a local "
                "server as openai:MODEL@http://127.0.0.1:PORT/v1)"
            ) from None

    def _options(self, node: Node, model: str, prompt: str) -> dict[str, Any]:
        options: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
        }
        if self.config.reasoning_effort:
            options["reasoning_effort"] = self.config.reasoning_effort
        return options

    def _stream(
        self, request: BackendRequest, model: str, sink: Callable[[str], None]
    ) -> tuple[str, dict[str, int]]:
        remaining = request.remaining()
        stream = self.client().chat.completions.create(
            **self._options(request.node, model, request.prompt),
            stream=True,
            stream_options={"include_usage": True},
            **({"timeout": remaining} if remaining is not None else {}),
        )
        request.add_closer(stream.close)
        answered, usage = "", {}
        try:
            for chunk in stream:
                if request.cancel.is_set():
                    break
                answered = chunk.model or answered
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices:
                    if choice.delta is not None and choice.delta.content:
                        sink(choice.delta.content)
        finally:
            stream.close()
        return answered, usage

    def _complete(self, node: Node, prompt: str, model: str) -> BackendReply:
        response = self.client().chat.completions.create(**self._options(node, model, prompt))
        text = "".join(c.message.content or "" for c in response.choices)
        usage = _usage(response.usage) if response.usage is not None else {}
        return reply_from_text(text, response.model or model, usage)


def _usage(usage: Any) -> dict[str, int]:
    return {
        "input_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
        "output_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
    }
