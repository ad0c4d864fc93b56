"""What a pipeline may choose of its backend: a provider and a model name, never where the call
goes nor with which credentials.

Endpoints and keys belong to the user (the backend spec given to the CLI, the notebook or the
API, the client's environment such as ``OPENAI_BASE_URL``, ``%config``). A pipeline file is
often written by someone else: were ``llm_provider="openai@http://HOST/v1"`` or
``llm_model="x@http://HOST/v1"`` honoured, whoever wrote it would receive the user's key with
every call. So a value of :data:`PIPELINE_CHOICES` that carries a URL, a host, a port or a
key-like token is a ``validate`` error (:mod:`.lint`) and is refused again when a backend takes
the node (:func:`refuse_endpoint`), so a run that skipped validation still never sends it.

Light on purpose (``re`` and ``os`` only): ``validate`` imports it.
"""

from __future__ import annotations

import os
import re

from freshness_magic.engine.model import Node
from freshness_magic.errors import BackendError

PIPELINE_CHOICES: tuple[str, ...] = ("llm_provider", "llm_model")
"""The attributes (on a node or from ``model_stylesheet``) that reach the choice of backend."""

_PROVIDER_NAME = r"[A-Za-z][A-Za-z0-9_.\-]*\Z"
_HOST = (
    r"localhost|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\]"
    r"|[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"
)
_CHECKS: tuple[tuple[str, str], ...] = (
    (r"[A-Za-z][A-Za-z0-9+.\-]*://", "a URL"),
    (rf"(?:^|[@/\s])(?:{_HOST}):\d{{1,5}}(?![\w.])", "a host and port"),
    (r"@\s*(?:localhost\b|\d{1,3}(?:\.\d{1,3}){3}|\[)", "a host after '@'"),
    (r"(?:^|[@/\s])(?:localhost|\d{1,3}(?:\.\d{1,3}){3})(?![\w.])", "a host"),
    (
        r"(?:^|[^A-Za-z0-9])(?:sk-ant-|sk-|sk_|gsk_|hf_|xai-|ghp_|github_pat_|AKIA|AIza)"
        r"[A-Za-z0-9_\-]{8,}",
        "a key-like token",
    ),
    (r"(?i)(?:api[_\-]?key|token|secret|passw(?:or)?d|bearer)\s*[=:\s]\s*\S", "a credential"),
    (
        r"(?<![A-Za-z0-9])(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{32,}",
        "a key-like token",
    ),
)
CREDENTIAL_ENV_VARS: tuple[str, ...] = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
)
"""Environment variables holding the user's keys (never written, never taken from a pipeline)."""


def endpoint_in(value: str) -> str | None:
    """What ``value`` carries that only the user may choose (``"a URL"``, ``"a host and
    port"``, ``"a key-like token"``, ...), or None for a plain provider or model name.

    Model names keep what real ones use: ``llama3.1:8b``, ``meta-llama/Llama-3-8B``,
    ``claude-3-5-sonnet@20240620``, ``ft:gpt-4o-mini:org::abc123``.
    """
    text = value.strip()
    for pattern, what in _CHECKS:
        if re.search(pattern, text):
            return what
    for name in CREDENTIAL_ENV_VARS:
        secret = os.environ.get(name, "")
        if len(secret) >= 6 and secret in text:
            return f"the value of {name}"
    return None


def choice_problem(attribute: str, value: str) -> str | None:
    """Why ``attribute=value`` may not come from a pipeline (see :func:`endpoint_in`; a
    provider is a name, nothing else), or None when it may."""
    if not value.strip():
        return None
    carried = endpoint_in(value)
    if carried is not None:
        return f"carries {carried}"
    if attribute == "llm_provider" and not re.match(_PROVIDER_NAME, value.strip()):
        return "is not a provider name (a provider is a name such as openai or anthropic)"
    return None


WHERE_ENDPOINTS_GO = (
    "a pipeline names only a provider and a model; give the endpoint and key outside it: the "
    "backend spec (--backend openai:MODEL@URL, backend= in the API, %config "
    "PipelineMagics.backend) or the environment (OPENAI_BASE_URL, OPENAI_API_KEY, "
    "ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY)"
)
"""The fix offered wherever a pipeline's endpoint is refused."""


def refuse_endpoint(node: Node) -> None:
    """BackendError naming the node and attribute when the node's provider or model (its own or
    its stylesheet's) carries an endpoint or a credential: a backend never honours one."""
    for attribute in PIPELINE_CHOICES:
        value = node.attrs.get(attribute, "")
        problem = choice_problem(attribute, value)
        if problem is not None:
            raise BackendError(
                f"node '{node.id}': {attribute}={shown(value)} {problem}, which a pipeline may "
                f"not choose; {WHERE_ENDPOINTS_GO}"
            )


def shown(value: str) -> str:
    """``value`` quoted for a message, without what may be a credential in it."""
    from freshness_magic.backends.spec import REDACTED, redact_url

    carried = endpoint_in(value) or ""
    if "key" in carried or "credential" in carried or "value of" in carried:
        return repr(REDACTED)
    return repr(redact_url(value.strip()))
