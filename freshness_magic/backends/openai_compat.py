"""OpenAI-compatible chat completions through the official ``openai`` client (extra ``openai``).

``base_url`` (from the spec's ``@URL``, else ``OPENAI_BASE_URL``) makes it serve Ollama, vLLM,
llama.cpp's server, LM Studio and hosted gateways. The key comes from ``OPENAI_API_KEY`` (or the
client's own configuration); with an explicit ``@URL`` and no key set, a placeholder is sent,
since local servers ask for none. Responses stream with ``include_usage`` so token counts arrive
in the last chunk.
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
    server_events,
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

    def missing_credentials(self) -> tuple[str, ...]:
        """``OPENAI_API_KEY``, unless set or the spec names the server (a local one needs
        none: a placeholder is sent)."""
        if self.config.base_url or os.environ.get("OPENAI_API_KEY"):
            return ()
        return ("OPENAI_API_KEY",)

    def _options(
        self, node: Node, model: str, prompt: str, request: BackendRequest | None = None
    ) -> dict[str, Any]:
        """The request body: the carried context as a system message and the thread's earlier
        messages before the prompt (:class:`BackendRequest`), or the prompt alone."""
        messages = [{"role": "user", "content": prompt}]
        if request is not None:
            system = request.system()
            messages = ([{"role": "system", "content": system}] if system else []) + (
                request.messages()
            )
        options: dict[str, Any] = {"model": model, "messages": messages}
        if self.config.reasoning_effort:
            options["reasoning_effort"] = self.config.reasoning_effort
        return options

    def _stream(
        self, request: BackendRequest, model: str, sink: Callable[[str], None]
    ) -> StreamEnd:
        """The answer's chunks into ``sink``. It is complete only with a ``finish_reason`` or
        the closing ``[DONE]``: events are read here, not through the client's iterator, which
        ends the same way whether ``[DONE]`` came or the connection just closed. A server
        that ignores ``stream=true`` and answers one JSON completion is read as that."""
        remaining = request.remaining()
        stream = self.client().chat.completions.create(
            **self._options(request.node, model, request.prompt, request),
            stream=True,
            stream_options={"include_usage": True},
            **({"timeout": remaining} if remaining is not None else {}),
        )
        request.add_closer(stream.close)
        end = StreamEnd(missing="a finish_reason or [DONE]")
        try:
            response = stream.response
            if is_json_response(response):
                return _json_answer(json.loads(response.read()), sink, end)
            for data in server_events(response, client_module("openai")):
                if request.cancel.is_set():
                    break
                if data.strip() == "[DONE]":
                    end.ended = True
                    break
                _chunk(_parsed(data), sink, end)
        finally:
            stream.close()
        return end

    def _complete(self, node: Node, prompt: str, model: str) -> BackendReply:
        response = self.client().chat.completions.create(**self._options(node, model, prompt))
        if not response.choices or not all(c.finish_reason for c in response.choices):
            raise BackendError(
                f"{self.describe()}: the answer was cut off: it came without a finish_reason"
            )
        text = "".join(c.message.content or "" for c in response.choices)
        usage = _usage(response.usage) if response.usage is not None else {}
        return reply_from_text(text, response.model or model, usage)


def _parsed(data: str) -> dict[str, Any]:
    """One event's JSON object; an error event as the provider's message."""
    try:
        chunk = json.loads(data)
    except ValueError:
        raise BackendError(f"the server sent an event that is not JSON: {data[:200]!r}") from None
    if not isinstance(chunk, dict):
        raise BackendError(f"the server sent an event that is not an object: {data[:200]!r}")
    error = chunk.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else error
        raise BackendError(f"the server reported an error in the stream: {message}")
    return chunk


def _chunk(chunk: dict[str, Any], sink: Callable[[str], None], end: StreamEnd) -> None:
    end.model = str(chunk.get("model") or end.model)
    if isinstance(chunk.get("usage"), dict):
        end.usage = _usage_of(chunk["usage"])
    for choice in chunk.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta") or {}
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str) and content:
            sink(content)
        if choice.get("finish_reason"):
            end.ended = True


def _json_answer(body: Any, sink: Callable[[str], None], end: StreamEnd) -> StreamEnd:
    """A plain chat completion given to a streamed request: its text at once; complete when
    every choice has its ``finish_reason``."""
    if not isinstance(body, dict):
        raise BackendError("the server answered with JSON that is not a chat completion")
    _parsed(json.dumps(body))  # an error object as the provider's message
    choices = [c for c in body.get("choices") or [] if isinstance(c, dict)]
    for choice in choices:
        message = choice.get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and content:
            sink(content)
    end.model = str(body.get("model") or "")
    if isinstance(body.get("usage"), dict):
        end.usage = _usage_of(body["usage"])
    end.ended = bool(choices) and all(c.get("finish_reason") for c in choices)
    end.missing = "a finish_reason"
    return end


def _usage_of(usage: dict[str, Any]) -> dict[str, int]:
    return {
        "input_tokens": int(usage.get("prompt_tokens") or 0),
        "output_tokens": int(usage.get("completion_tokens") or 0),
    }


def _usage(usage: Any) -> dict[str, int]:
    return {
        "input_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
        "output_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
    }
