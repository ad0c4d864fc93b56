"""Install requirements into the virtual environment this interpreter runs in: through uv when
pip can install uv, else through pip alone.

    .venv/bin/python scripts/venv-install.py -e '.[test,browser,dev,docs]'
    .venv/bin/python scripts/venv-install.py --python other/bin/python 'dist/x.whl[demo]'

With ``--python PATH`` first, the requirements go into that interpreter's environment instead,
which needs no pip of its own and gets none (the tests install a built wheel into a fresh
environment this way); uv and pip are the ones of the running interpreter.

uv resolves, downloads and unpacks in parallel and compiles no bytecode up front (an import
writes it when first needed): on the 2-core development machine the editable install with every
extra took about 70 s through pip and 23 s through uv with an empty cache, 5 s with a warm one
(the few seconds pip needs to install uv itself included). The environment is the same either
way: the same versions, pip upgraded in it (the tests and ``make demo`` use it), the package
installed editable.

uv does not read pip's configuration, so the settings that say where packages come from are taken
from ``pip config list`` (configuration files and ``PIP_*`` variables alike) and passed on: index
URLs, find-links, constraints, trusted hosts, the certificate bundle, the proxy and the network
timeout. ``--index-strategy unsafe-best-match`` makes uv choose among all indexes as pip does. If
uv cannot be installed or fails, the same install runs through pip, so no machine is worse off
than with pip alone.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

PIP = [sys.executable, "-m", "pip"]
SECTIONS = (":env:", "install", "global")
"""Where pip reads an option, the first found winning (its environment variables, then the
``[install]`` and ``[global]`` sections of its files)."""


def pip_settings() -> dict[str, str]:
    """pip's configured options, one value per option name after pip's own precedence."""
    listed = subprocess.run([*PIP, "config", "list"], capture_output=True, text=True, check=False)
    found: dict[tuple[str, str], str] = {}
    for line in listed.stdout.splitlines():
        key, sep, raw = line.partition("=")
        section, dot, name = key.rpartition(".")
        if not sep or not dot:
            continue
        values = shlex.split(raw)
        found[(section, name)] = values[0] if values else ""
    settings: dict[str, str] = {}
    for section in reversed(SECTIONS):
        for (where, name), value in found.items():
            if where == section:
                settings[name] = value
    return settings


def uv_options(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """uv's command-line options and environment for pip's ``settings``."""
    options: list[str] = ["--index-strategy", "unsafe-best-match"]
    if settings.get("index-url"):
        options += ["--index-url", settings["index-url"]]
    for name, flag in (
        ("extra-index-url", "--extra-index-url"),
        ("find-links", "--find-links"),
        ("constraint", "--constraint"),
        ("trusted-host", "--allow-insecure-host"),
    ):
        for value in settings.get(name, "").split():
            options += [flag, value]
    if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        options.append("--no-index")
    env = dict(os.environ)
    if settings.get("cert"):
        env["SSL_CERT_FILE"] = settings["cert"]
    if settings.get("proxy"):
        env["HTTP_PROXY"] = env["HTTPS_PROXY"] = settings["proxy"]
    timeout = settings.get("timeout") or settings.get("default-timeout")
    if timeout:
        env["UV_HTTP_TIMEOUT"] = timeout
    return options, env


def install_with_uv(requirements: list[str], target: str | None = None) -> bool:
    """Install ``requirements`` through uv into this environment (with the newest pip) or into
    ``target``'s (nothing more); False when that did not work. uv is installed next to this
    interpreter first unless it is there already."""
    uv = Path(sys.executable).parent / "uv"
    if not uv.exists():
        got_uv = subprocess.run([*PIP, "install", "-q", "uv"], check=False)
        if got_uv.returncode != 0 or not uv.exists():
            print("venv-install: uv could not be installed; installing with pip", file=sys.stderr)
            return False
    options, env = uv_options(pip_settings())
    command = [str(uv), "pip", "install", "-q", "--python", target or sys.executable, *options]
    pip = [] if target else ["--upgrade-package", "pip", "pip"]
    done = subprocess.run([*command, *pip, *requirements], env=env)
    if done.returncode != 0:
        print("venv-install: uv could not install them; trying with pip", file=sys.stderr)
        return False
    return True


def install_with_pip(requirements: list[str], target: str | None = None) -> None:
    """Upgrade pip and install ``requirements`` with it (into ``target``'s environment: the
    requirements alone, not byte-compiled up front, as uv does); exit with pip's status if it
    fails."""
    env = dict(os.environ)
    # setuptools prints a notice about .pth files on every editable install; it is not ours to fix.
    env["PYTHONWARNINGS"] = "ignore:Editable installation"
    steps = [["--upgrade", "pip"], requirements]
    pip = PIP
    if target:
        steps = [["--no-compile", *requirements]]
        pip = [*PIP, "--python", target]
    for step in steps:
        done = subprocess.run([*pip, "install", "-q", *step], env=env, check=False)
        if done.returncode != 0:
            sys.exit(done.returncode)


def main(arguments: list[str]) -> None:
    target = None
    if arguments[:1] == ["--python"]:
        if len(arguments) < 2:
            sys.exit("venv-install: --python needs the path of the interpreter to install for")
        target, arguments = arguments[1], arguments[2:]
    if not arguments:
        sys.exit(
            "usage: python scripts/venv-install.py [--python PATH] REQUIREMENT... "
            "(as for pip install)"
        )
    if sys.prefix == sys.base_prefix:
        sys.exit("venv-install: run it with a virtual environment's python (.venv/bin/python)")
    if not install_with_uv(arguments, target):
        install_with_pip(arguments, target)


if __name__ == "__main__":
    main(sys.argv[1:])
