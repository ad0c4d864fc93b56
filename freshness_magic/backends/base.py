"""What the model-API backends share: per-node settings, retries with the §3.6 backoff, and
one-line error messages without credentials.

Retries are ours, not the client's (clients are built with ``max_retries=0``): rate limits (429),
server errors (5xx), timeouts and connection errors are retried up to :data:`MAX_RETRIES` times
with :class:`~freshness_magic.engine.retry.BackoffConfig` delays (a ``Retry-After`` header, when
longer, wins), but never past the node's deadline, never after the stop, and never once response
text has been streamed (a retry would repeat it).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from freshness_magic.backends.choice import CREDENTIAL_ENV_VARS, refuse_endpoint
from freshness_magic.engine.handlers.llm import REQUEST_TIMED_OUT, BackendReply, BackendRequest
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome
from freshness_magic.engine.retry import BackoffConfig
from freshness_magic.engine.status import StageStatus
from freshness_magic.errors import BackendError

MAX_RETRIES = 4
"""Retries of one call on a retryable error (the spec's ``standard`` preset: 5 attempts)."""
T = TypeVar("T")

ProviderBackends = Callable[[str, str], object]
"""``(provider, llm_model) -> backend``: another provider's backend for a node that names one
(None when the provider is no model API)."""


def redact(text: str) -> str:
    """``text`` with the value of every credential variable replaced by ``***``."""
    for name in CREDENTIAL_ENV_VARS:
        secret = os.environ.get(name, "")
        if len(secret) >= 6:
            text = text.replace(secret, "***")
    return text


def one_line(text: str, limit: int = 500) -> str:
    """Whitespace folded, credentials redacted, cut at ``limit`` characters."""
    text = redact(" ".join(str(text).split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def missing_extra(package: str) -> BackendError:
    """The one-line error for an optional client library that is not installed."""
    return BackendError(
        f"the {package} backend needs the {package!r} package: "
        f"pip install 'freshness_magic[{package}]'"
    )


def require_client(package: str) -> None:
    """The one-line error naming the extra unless the optional client library ``package`` is
    installed, found without importing it: importing an SDK costs a second or more, which a
    run refused for a missing key, or one that never calls the model, should not pay."""
    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a broken or blocked module counts as missing
        found = False
    if not found:
        raise missing_extra(package)


def client_module(package: str) -> Any:
    """The optional client library ``package`` (the extra of the same name), imported, or the
    one-line error naming the extra."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise missing_extra(package) from None


@dataclass(frozen=True)
class ModelSettings:
    """Which model a model-API backend calls, and how."""

    provider: str
    model: str = ""
    base_url: str | None = None
    reasoning_effort: str = ""
    """Sent only when set on the node, its stylesheet or the backend (many models reject it)."""

    def for_node(self, node: Node) -> ModelSettings:
        """The node's ``llm_model`` and ``reasoning_effort`` over these (provider: see caller)."""
        return replace(
            self,
            model=node.llm_model or self.model,
            reasoning_effort=node.attrs.get("reasoning_effort", "") or self.reasoning_effort,
        )

    def facts(self, kind: str) -> dict[str, Any]:
        from freshness_magic.backends.spec import redact_url

        facts: dict[str, Any] = {"backend": kind, "provider": self.provider, "model": self.model}
        if self.base_url:
            facts["base_url"] = redact_url(self.base_url)
        if self.reasoning_effort:
            facts["reasoning_effort"] = self.reasoning_effort
        return facts


class RetryableCallError(Exception):
    """A provider error worth retrying; ``retry_after`` in seconds when the server said."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def with_retries(
    call: Callable[[], T],
    request: BackendRequest | None,
    classify: Callable[[Exception], Exception],
    *,
    streamed: Callable[[], bool] = lambda: False,
    backoff: BackoffConfig | None = None,
    rng: random.Random | None = None,
) -> T:
    """``call()`` with retries; ``classify`` maps a client error to a
    :class:`RetryableCallError` or the final exception (a :class:`BackendError`)."""
    config = backoff or BackoffConfig()
    attempt = 1
    while True:
        try:
            return call()
        except Exception as exc:
            if request is not None and request.cancel.is_set():  # our own stop closed it
                raise BackendError("interrupted") from None
            mapped = classify(exc)
            if not isinstance(mapped, RetryableCallError) or attempt > MAX_RETRIES:
                raise BackendError(one_line(str(mapped))) from None
            delay = max(config.delay_for_attempt(attempt, rng), mapped.retry_after or 0.0)
            delay = min(delay, config.max_delay)
            if request is not None:
                request.last_error = one_line(str(mapped))
            remaining = request.remaining() if request is not None else None
            if streamed() or (remaining is not None and delay >= remaining):
                raise BackendError(one_line(str(mapped))) from None
            if request is None:
                time.sleep(delay)
            elif request.cancel.wait(delay):
                raise BackendError("interrupted") from None
            attempt += 1


def http_error_text(status: int | None, body: object, fallback: str) -> str:
    """``HTTP 500: <the provider's message>`` from an error body, else ``fallback``."""
    message = ""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            message = str(error.get("message") or "")
        elif isinstance(error, str):
            message = error
    text = message or fallback
    return f"HTTP {status}: {text}" if status else text


def retry_after_seconds(headers: Any) -> float | None:
    """The ``Retry-After`` header in seconds (numeric form only), if any."""
    try:
        value = headers.get("retry-after") if headers is not None else None
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def reply_from_text(text: str, model: str, usage: dict[str, int]) -> BackendReply:
    return BackendReply(text=text, model=model, usage={k: v for k, v in usage.items() if v})


@dataclass
class StreamEnd:
    """How one streamed answer ended: the model that answered, token counts, and whether the
    provider said the answer was complete (``ended``; else ``missing`` names what it left out,
    e.g. ``a finish_reason or [DONE]``)."""

    model: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    ended: bool = False
    missing: str = ""


def is_json_response(response: Any) -> bool:
    """Whether an HTTP response to a streamed request is one JSON document (a server that
    ignores ``stream=true``), not server-sent events."""
    kind = str(response.headers.get("content-type", "")).split(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


def server_events(response: Any, sdk: Any) -> Iterator[str]:
    """The ``data`` of each server-sent event of ``response`` (the text of ``[DONE]`` too);
    a transport error as the client library's own (``sdk.APITimeoutError`` or
    ``sdk.APIConnectionError``), which the retry loop knows."""
    data: list[str] = []
    try:
        for line in response.iter_lines():
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            yield "\n".join(data)
    except sdk.APIError:
        raise
    except Exception as exc:
        if "timeout" in type(exc).__name__.lower():
            raise sdk.APITimeoutError(request=response.request) from exc
        raise sdk.APIConnectionError(request=response.request) from exc


class ModelBackend:
    """Common part of the model-API backends; subclasses set ``name`` and implement
    ``_client_for`` (build the client), ``_stream`` and ``_complete``."""

    name = "model"

    def __init__(
        self,
        config: ModelSettings,
        clients: dict[str, Any] | None = None,
        providers: ProviderBackends | None = None,
    ) -> None:
        self.config = config
        self._clients: dict[str, Any] = clients if clients is not None else {}
        """Clients by base URL, shared with the per-node copies of this backend."""
        self._providers = providers
        """Builds another provider's backend for a node's ``llm_provider`` (the registry gives
        it, so this module need not know the registry); None: no other provider."""

    def describe(self) -> str:
        from freshness_magic.backends.spec import BackendSpec

        spec = BackendSpec(self.name, model=self.config.model, base_url=self.config.base_url)
        return spec.text()

    def settings(self) -> dict[str, Any]:
        return self.config.facts(self.name)

    def for_node(self, node: Node) -> ModelBackend:
        """This backend with the node's model settings; another provider's backend when the
        node's ``llm_provider`` names one.

        Where the call goes stays the user's: a provider or model that carries an endpoint or
        a key is refused (:func:`~freshness_magic.backends.choice.refuse_endpoint`), and the
        other provider's backend is built from its name and the model alone, so its endpoint
        and key come from the user's environment."""
        refuse_endpoint(node)
        provider = node.llm_provider.strip().lower()
        if provider and provider != self.name:
            if self._providers is None:
                raise BackendError(
                    f"node '{node.id}': llm_provider={provider!r}, but this {self.name} backend "
                    "was not made by resolve_backend, which knows the other providers; make it "
                    "with resolve_backend or remove llm_provider"
                )
            try:
                other = self._providers(provider, node.llm_model)
            except BackendError as exc:
                raise BackendError(f"node '{node.id}': llm_provider={provider!r}: {exc}") from None
            if not isinstance(other, ModelBackend):
                raise BackendError(
                    f"node '{node.id}': llm_provider={provider!r} is not a model API backend; "
                    "use openai or anthropic"
                )
            return other.for_node(_without_provider(node))
        return type(self)(self.config.for_node(node), self._clients, self._providers)

    def check_models(self, graph: Graph) -> None:
        """Refuse, before a run starts, a pipeline whose LLM nodes would reach this backend
        with no model (else it fails at the first of them, after the nodes before it ran)."""
        nodes = [n for n in graph.nodes.values() if n.handler_type == "codergen"]
        missing = [n.id for n in nodes if not self.for_node(n).config.model]
        if missing:
            named = ", ".join(f"'{node_id}'" for node_id in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            which = "nodes" if len(missing) > 1 else "node"
            raise BackendError(
                f"no model for the {self.name} backend at {which} {named}{more} (llm_model is "
                f"not set); write {self.name}:MODEL or set llm_model on the {which} or in the "
                "stylesheet"
            )

    def missing_credentials(self) -> tuple[str, ...]:
        """The environment variables of which one must be set for this backend's calls to
        carry a key (empty: none is missing)."""
        return ()

    def check_credentials(self, graph: Graph) -> None:
        """Refuse, before a run starts (before its directory exists), a pipeline whose LLM
        nodes would reach a backend without its API key: one line naming the variable."""
        needed: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        for node in graph.nodes.values():
            if node.handler_type == "codergen":
                backend = self.for_node(node)
                missing = backend.missing_credentials()
                if missing:
                    needed.setdefault((backend.name, missing), []).append(node.id)
        for (name, missing), nodes in needed.items():
            named = ", ".join(f"'{node_id}'" for node_id in nodes[:5])
            more = f" and {len(nodes) - 5} more" if len(nodes) > 5 else ""
            raise BackendError(
                f"the {name} backend has no API key (needed by {named}{more}): set "
                f"{' or '.join(missing)} in the environment, then run again"
            )

    def _model(self, node: Node) -> str:
        if not self.config.model:
            raise BackendError(
                f"node '{node.id}': no model for the {self.name} backend; write "
                f"{self.name}:MODEL or set llm_model on the node or in the stylesheet"
            )
        return self.config.model

    def client(self) -> Any:
        key = self.config.base_url or ""
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = self._client_for(self.config.base_url)
        return client

    def _client_for(self, base_url: str | None) -> Any:
        raise NotImplementedError

    def _classify(self, exc: Exception) -> Exception:
        """A client error as what the retry loop needs: RetryableCallError (429, 5xx, timeout,
        no connection) or BackendError. The OpenAI and Anthropic clients (the package named
        ``name``) share these exception classes' names."""
        sdk = client_module(self.name)
        if isinstance(exc, sdk.APIStatusError):
            text = http_error_text(exc.status_code, exc.body, exc.message)
            if exc.status_code == 429 or exc.status_code >= 500:
                return RetryableCallError(text, retry_after_seconds(exc.response.headers))
            return BackendError(text)
        if isinstance(exc, sdk.APITimeoutError):
            return RetryableCallError(REQUEST_TIMED_OUT)
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__ or exc
            return RetryableCallError(f"the connection to {self.describe()} failed: {cause}")
        return exc

    def _stream(
        self, request: BackendRequest, model: str, sink: Callable[[str], None]
    ) -> StreamEnd:
        """Stream one answer into ``sink`` (a JSON answer to the streamed request: all of it
        at once); say how it ended."""
        raise NotImplementedError

    def _complete(self, node: Node, prompt: str, model: str) -> BackendReply:
        raise NotImplementedError

    def generate(self, request: BackendRequest) -> BackendReply:
        model = self._model(request.node)
        streamed = [False]

        def sink(text: str) -> None:
            if text:
                streamed[0] = True
                request.on_text(text)

        end: StreamEnd = with_retries(
            lambda: self._stream(request, model, sink),
            request,
            self._classify,
            streamed=lambda: streamed[0],
        )
        reply = reply_from_text("", end.model or model, end.usage)
        if request.cancel.is_set():
            return reply
        if not streamed[0]:
            raise BackendError(
                f"{self.describe()} answered without any text (an empty answer): there is no "
                "response to go on with"
            )
        if not end.ended:  # a cleanly closed connection is no complete answer
            reply.outcome = Outcome(
                status=StageStatus.RETRY,
                failure_reason=(
                    f"{self.describe()}: the answer was cut off: the stream ended without "
                    f"{end.missing}; the partial answer is in response.md"
                ),
            )
        return reply

    def __call__(self, node: Node, prompt: str, context: Any) -> str:
        """The plain §4.5 interface (one JSON response, no streaming), e.g. for fan-in."""
        backend = self.for_node(node)
        model = backend._model(node)
        reply = with_retries(
            lambda: backend._complete(node, prompt, model), None, backend._classify
        )
        return reply.text


def _without_provider(node: Node) -> Node:
    return Node(node.id, {k: v for k, v in node.attrs.items() if k != "llm_provider"})
