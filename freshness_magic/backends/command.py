"""``command:COMMAND LINE``: an agent CLI run in the work directory; its stdout is the response.

The prompt goes to the command's stdin, after the context the node's fidelity mode carries
(``BackendRequest.text``), or, when the command line contains ``{prompt_file}``, that
placeholder becomes the (shell-quoted) path of the node's ``prompt.md`` and stdin is empty;
``{context_file}`` becomes the path of its ``context.md`` (written only when something is
carried).
The command runs through the shell in its own process group (a stop or timeout ends the whole
group: SIGTERM, a grace period, SIGKILL). stdout streams into the response; stderr goes to
``agent_stderr.txt`` in the node's folder. It sees ``FRESHNESS_NODE_ID``, ``FRESHNESS_STAGE_DIR``,
``FRESHNESS_RUN_DIR`` and, when set for the node, ``FRESHNESS_LLM_MODEL``,
``FRESHNESS_LLM_PROVIDER`` and ``FRESHNESS_REASONING_EFFORT``. A non-zero exit raises with the
exit code and the tail of stderr.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import shlex
import subprocess
import threading
from typing import Any

from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.llm import BackendReply, BackendRequest
from freshness_magic.engine.handlers.tool import KILL_GRACE_SECONDS, kill_group
from freshness_magic.engine.model import Node
from freshness_magic.errors import BackendError

STDERR_TAIL_CHARS = 800
READ_BYTES = 65536


class CommandBackend:
    """Runs ``command`` once per attempt of a codergen node."""

    name = "command"

    def __init__(self, command: str, node: Node | None = None) -> None:
        self.command = command
        self.node = node

    def describe(self) -> str:
        return f"command:{self.command}"

    def settings(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"backend": self.describe()}
        facts.update({k: v for k, v in self._llm_env().items() if v})
        return facts

    def for_node(self, node: Node) -> CommandBackend:
        """This command for ``node``; its model and provider reach the command's environment,
        so one that carries an endpoint or a key is refused as by the model backends."""
        from freshness_magic.backends.choice import refuse_endpoint

        refuse_endpoint(node)
        return CommandBackend(self.command, node)

    def _llm_env(self) -> dict[str, str]:
        node = self.node
        if node is None:
            return {}
        return {
            "model": node.llm_model,
            "provider": node.llm_provider,
            "reasoning_effort": node.attrs.get("reasoning_effort", ""),
        }

    def _environment(self, request: BackendRequest) -> dict[str, str]:
        env = {
            **os.environ,
            "FRESHNESS_NODE_ID": request.node.id,
            "FRESHNESS_STAGE_DIR": str(request.stage_dir),
            "FRESHNESS_RUN_DIR": str(request.stage_dir.parent.parent),
        }
        for key, value in self._llm_env().items():
            if value:
                name = "REASONING_EFFORT" if key == "reasoning_effort" else f"LLM_{key.upper()}"
                env[f"FRESHNESS_{name}"] = value
        return env

    def generate(self, request: BackendRequest) -> BackendReply:
        uses_file = "{prompt_file}" in self.command
        line = self.command.replace("{prompt_file}", shlex.quote(str(request.prompt_file)))
        context_file = request.context_file or request.stage_dir / "context.md"
        line = line.replace("{context_file}", shlex.quote(str(context_file)))
        stderr_path = request.stage_dir / "agent_stderr.txt"
        with stderr_path.open("wb") as err:
            try:
                process = subprocess.Popen(
                    line,
                    shell=True,
                    cwd=request.workdir,
                    stdin=subprocess.DEVNULL if uses_file else subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,
                    env=self._environment(request),
                )
            except OSError as exc:
                raise BackendError(f"cannot start {line!r} in {request.workdir}: {exc}") from None
            request.add_closer(lambda: kill_group(process.pid, process, KILL_GRACE_SECONDS))
            if not uses_file:
                threading.Thread(target=_feed, args=(process, request.text()), daemon=True).start()
            try:
                _pump(process, request)
            finally:
                if process.poll() is None:
                    kill_group(process.pid, process, KILL_GRACE_SECONDS)
                if process.stdout is not None:
                    process.stdout.close()
        code = process.wait()
        if request.cancel.is_set():
            raise BackendError("interrupted")
        if code != 0:
            tail = stderr_path.read_bytes()[-STDERR_TAIL_CHARS:].decode("utf-8", "replace")
            tail = " | ".join(part for part in tail.strip().splitlines() if part.strip())
            raise BackendError(f"exit code {code}: {line}" + (f"; stderr: {tail}" if tail else ""))
        return BackendReply()

    def __call__(self, node: Node, prompt: str, context: Context) -> str:
        """The plain §4.5 interface: run the command once and return its whole stdout."""
        from freshness_magic.backends.collect import collect_text

        return collect_text(self.for_node(node), node, prompt, context)


def _feed(process: subprocess.Popen[bytes], prompt: str) -> None:
    """Write the prompt to stdin and close it (a command that stops reading is fine)."""
    stdin = process.stdin
    if stdin is None:
        return
    with contextlib.suppress(OSError):
        stdin.write(prompt.encode("utf-8"))
    with contextlib.suppress(OSError):
        stdin.close()


def _pump(process: subprocess.Popen[bytes], request: BackendRequest) -> None:
    """Stream stdout to ``request.on_text`` until EOF or the stop."""
    stdout = process.stdout
    if stdout is None:
        return
    fd = stdout.fileno()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    while not request.cancel.is_set():
        ready, _, _ = select.select([fd], [], [], 0.1)
        if not ready:
            continue
        data = os.read(fd, READ_BYTES)
        if not data:
            break
        request.on_text(decoder.decode(data))
    request.on_text(decoder.decode(b"", final=True))
