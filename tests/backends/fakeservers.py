"""Local HTTP servers on 127.0.0.1 that speak the OpenAI chat completions and the Anthropic
messages protocols (JSON and server-sent events), for driving the real client libraries.

The requested model name picks the behaviour:

- ``flaky-*``: the first request answers 429 (``Retry-After: 0``), later ones succeed;
- ``broken-*``: always 500 with ``{"error": {"message": "the model is on fire"}}``;
- ``slow-*``: waits (until the server stops) before answering (``received`` is set by then);
- ``trickle-*``: streams one chunk, then waits (until the server stops);
- ``badkey-*``: 401 whose message repeats the key it was sent (as some providers do);
- ``silent-*``: a well-formed stream without any text;
- ``cutoff-*``: streams three chunks of text, then closes the connection cleanly without the
  end of the answer (no ``finish_reason`` nor ``[DONE]``; no ``message_stop``); asked without
  streaming, answers a completion whose ``finish_reason``/``stop_reason`` is null;
- ``nodone-*``: (OpenAI) the last chunk has ``finish_reason`` but no ``[DONE]`` follows;
- ``plainjson-*``: ignores ``stream=true`` and answers one JSON completion;
- anything else: the answer ``ANSWER`` in words (streamed word by word when asked).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "The plan is ready and tested."


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeServer:
    url: str
    requests: list[Recorded] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    disconnects: list[str] = field(default_factory=list)
    received: threading.Event = field(default_factory=threading.Event)
    """Set once a request has been recorded: a test's clock may move on from there."""

    def models(self) -> list[str]:
        return [r.body.get("model", "") for r in self.requests]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        fake = self.server.fake
        fake.requests.append(
            Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        fake.received.set()
        model = str(body.get("model", ""))
        kind = self.server.kind
        if model.startswith("flaky") and sum(m == model for m in fake.models()) == 1:
            return self._error(429, "slow down", {"retry-after": "0"})
        if model.startswith("broken"):
            return self._error(500, "the model is on fire")
        if model.startswith("badkey"):
            key = self.headers.get("authorization", "") or self.headers.get("x-api-key", "")
            return self._error(401, f"Incorrect API key provided: {key.removeprefix('Bearer ')}")
        if model.startswith("slow"):
            fake.stop.wait(30)
            return self._error(500, "too late")
        if body.get("stream") and not model.startswith("plainjson"):
            return self._stream(kind, model)
        return self._json(200, _complete(kind, model))

    def _json(
        self, status: int, data: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._json(
            status, {"type": "error", "error": {"type": "api_error", "message": message}}, headers
        )

    def _stream(self, kind: str, model: str) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        events = _openai_events(model) if kind == "openai" else _anthropic_events(model)
        if model.startswith("cutoff"):
            events = _first_texts(events, 3)
        try:
            for index, (name, data) in enumerate(events):
                head = f"event: {name}\n" if name else ""
                self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                if model.startswith("trickle") and index == (0 if kind == "openai" else 2):
                    self.server.fake.stop.wait(30)
            if kind == "openai" and not model.startswith(("cutoff", "nodone")):
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.server.fake.disconnects.append(model)


def _words(model: str = "") -> list[str]:
    if model.startswith("silent"):
        return []
    words = ANSWER.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def _first_texts(
    events: Iterator[tuple[str, dict[str, Any]]], count: int
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events up to the ``count``-th that carries text."""
    for event in events:
        yield event
        count -= _has_text(event[1])
        if count == 0:
            return


def _has_text(data: dict[str, Any]) -> bool:
    delta = data.get("delta") or {}
    chunks = [c.get("delta", {}) for c in data.get("choices", [])]
    return bool(delta.get("text") or any(c.get("content") for c in chunks))


def _openai_events(model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model}
    words = _words(model)
    for index, word in enumerate(words):
        last = model.startswith("nodone") and index == len(words) - 1
        choice = {"index": 0, "delta": {"content": word}, "finish_reason": "stop" if last else None}
        yield "", {**base, "choices": [choice]}
    yield (
        "",
        {
            **base,
            "choices": [],
            "usage": {"prompt_tokens": 11, "completion_tokens": 6, "total_tokens": 17},
        },
    )


def _anthropic_events(model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 13, "output_tokens": 1},
    }
    yield "message_start", {"type": "message_start", "message": message}
    block = {"type": "text", "text": ""}
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    for word in _words(model):
        delta = {"type": "text_delta", "text": word}
        yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 6},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _complete(kind: str, model: str) -> dict[str, Any]:
    if kind == "openai":
        return {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": ANSWER},
                    "finish_reason": None if model.startswith("cutoff") else "stop",
                }
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 6, "total_tokens": 17},
        }
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": ANSWER}],
        "stop_reason": None if model.startswith("cutoff") else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 13, "output_tokens": 6},
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, kind: str, fake: FakeServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.kind = kind
        self.fake = fake


@contextmanager
def serve(kind: str) -> Iterator[FakeServer]:
    """A running fake ``openai`` or ``anthropic`` server; its URL is the client's base URL."""
    fake = FakeServer(url="")
    server = _Server(kind, fake)
    host, port = server.server_address[:2]
    fake.url = f"http://{host!s}:{port}" + ("/v1" if kind == "openai" else "")
    # serve_forever looks for shutdown() between polls: every 0.5 s by default, which each
    # test paid on leaving the server.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.stop.set()
        server.shutdown()
        server.server_close()
