"""Backend spec strings: what the user writes to choose a codergen backend.

::

    simulated                                   the default: no model is called
    openai[:MODEL][@BASE_URL]                   an OpenAI-compatible chat completions endpoint
    anthropic[:MODEL][@BASE_URL]                the Anthropic messages API
    command:COMMAND LINE                        an agent CLI; ``{prompt_file}`` or stdin
    python:MODULE:FUNCTION                      any ``(node, prompt, context)`` callable
    NAME[:ARGUMENT]                             a backend from the ``freshness_magic.backends``
                                                entry-point group

``@BASE_URL`` is the last ``@`` followed by ``http://`` or ``https://`` (model names such as
``claude-x@20240620`` keep their ``@``). Without it the client's own configuration applies
(``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from freshness_magic.errors import BackendError

_URL_AT = re.compile(r"@(https?://\S+)\Z")
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]*")

MODEL_KINDS: tuple[str, ...] = ("openai", "anthropic")
"""Kinds whose argument is ``MODEL[@BASE_URL]`` (and between which ``llm_provider`` switches)."""


@dataclass(frozen=True)
class BackendSpec:
    """A parsed spec: ``kind`` and the rest (``model``/``base_url`` for model kinds)."""

    kind: str
    argument: str = ""
    model: str = ""
    base_url: str | None = None

    def text(self) -> str:
        """The spec written back (a model kind without its base URL's credentials)."""
        if self.kind in MODEL_KINDS:
            text = f"{self.kind}:{self.model}" if self.model else self.kind
            return f"{text}@{redact_url(self.base_url)}" if self.base_url else text
        return f"{self.kind}:{self.argument}" if self.argument else self.kind


REDACTED = "***"
"""What stands for a credential in a written spec (:func:`redact_url`)."""
_SECRET_QUERY = re.compile(
    r"([?&][^=&#]*(?:key|token|secret|passw|sig|auth)[^=&#]*=)[^&#]*", re.IGNORECASE
)


def redact_url(url: str) -> str:
    """``https://user:secret@host/v1?api_key=k`` -> ``https://***@host/v1?api_key=***``: a URL
    may carry credentials, in its user part or in query parameters named like one."""
    url = re.sub(r"(https?://)[^/@\s]*@", rf"\1{REDACTED}@", url)
    return _SECRET_QUERY.sub(rf"\1{REDACTED}", url)


def lost_credentials(spec: str) -> bool:
    """Whether a written spec had credentials in its base URL (:func:`redact_url` took them out):
    it cannot be used again as written."""
    return f"://{REDACTED}@" in spec or bool(re.search(rf"[?&][^=&#]*={re.escape(REDACTED)}", spec))


def _url_like_after_at(argument: str) -> str | None:
    """What follows the last ``@`` of a model argument when it was meant as a base URL and is
    not one (no scheme, another scheme, nothing at all); None for a model name such as
    ``claude-3-5-sonnet@20240620``."""
    if "@" not in argument:
        return None
    after = argument.rpartition("@")[2]
    meant = re.match(r"(\w+://|localhost\b|\d+\.\d+\.\d+\.\d+|\[|[\w.-]+:\d+)", after)
    return after if not after or meant else None


def parse_spec(text: str) -> BackendSpec:
    """Parse a spec string; :class:`BackendError` says what is wrong and what to write."""
    raw = text.strip()
    if not raw:
        raise BackendError("empty backend spec; write e.g. simulated, openai:gpt-4o-mini")
    match = _KIND.match(raw)
    kind = match.group(0).lower() if match else ""
    rest = raw[len(kind) :]
    url_only = rest.startswith("@") and kind in MODEL_KINDS
    if not kind or not (rest == "" or rest.startswith(":") or url_only):
        raise BackendError(
            f"backend spec {text!r} does not start with a backend name; write e.g. "
            "openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, command:claude -p"
        )
    argument = (rest if url_only else rest[1:]).strip()
    if kind in MODEL_KINDS:
        base_url = None
        match = _URL_AT.search(argument)
        if match:
            base_url = match.group(1)
            argument = argument[: match.start()]
        elif (where := _url_like_after_at(argument)) is not None:
            model = argument.rpartition("@")[0] or "MODEL"
            host = where if where and "://" not in where else "HOST:PORT/v1"
            said = f"{where!r} after the @ is not an http(s) URL" if where else "no URL after the @"
            raise BackendError(f"backend spec {text!r}: {said}; write {kind}:{model}@http://{host}")
        return BackendSpec(kind, argument, model=argument.strip(), base_url=base_url)
    if kind == "simulated" and argument:
        raise BackendError(
            f"backend spec {text!r}: the simulated backend takes no argument; write simulated"
        )
    if kind in ("command", "python") and not argument:
        example = "command:claude -p" if kind == "command" else "python:mypkg.llm:answer"
        raise BackendError(f"backend spec {text!r} needs an argument, e.g. {example}")
    return BackendSpec(kind, argument)
