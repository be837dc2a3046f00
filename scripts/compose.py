"""docker-compose.yml as compose sees it, without Docker.

Compose interpolation (``${NAME:-default}``, ``$$`` escapes, ...) with a given environment and no
``.env`` file, YAML anchors and merge keys resolved, and readers for the parts that other code
needs: a service's environment (and its ``env_file``), command, ports and dependencies, the
environment block shared by every Airflow service (``x-airflow-common``), and the variables of
``dev.env`` (the development stack's public values: the file's secrets have no defaults, so
without them or a ``.env`` of one's own nothing interpolates). ``tests/test_compose.py`` checks
the file with these helpers; ``scripts/deployment.py`` configures a native deployment from them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
COMPOSE_PATH = REPO / "docker-compose.yml"
#: The development stack's variables, for `docker compose --env-file dev.env --profile dev`.
DEV_ENV_PATH = REPO / "dev.env"
#: The extension field whose environment every Airflow service merges in.
AIRFLOW_COMMON = "x-airflow-common"

# compose-go's template syntax: `$$` escapes, `$NAME` and `${...}` interpolate, any other `$` is an
# error ("invalid interpolation format") that stops `docker compose` before it starts anything.
TEMPLATE = re.compile(
    r"\$(?:(?P<escaped>\$)|(?P<named>[A-Za-z_][A-Za-z0-9_]*)|\{(?P<braced>[^}]*)\}|(?P<invalid>))"
)
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|-|:\?|\?|:\+|\+)(?P<arg>.*))?", re.DOTALL)


class InterpolationError(ValueError):
    """A `$` that compose would refuse, or a required variable that is missing."""


def _substitute(match: re.Match[str], env: Mapping[str, str], seen: list[tuple[str, str | None]]) -> str:
    if match.group("escaped") is not None:
        return "$"
    if match.group("named") is not None:
        name = match.group("named")
        seen.append((name, None))
        return env.get(name, "")
    braced = match.group("braced")
    if braced is None:
        raise InterpolationError(
            f"invalid interpolation at {match.string[match.start() : match.start() + 20]!r}"
        )
    parsed = _BRACED.fullmatch(braced)
    if parsed is None:
        raise InterpolationError(f"invalid interpolation ${{{braced}}}")
    name, op, arg = parsed.group("name", "op", "arg")
    value = env.get(name)
    seen.append((name, arg if op in (":-", "-") else None))
    if op is None:
        return value or ""
    if op == ":-":
        return value if value else arg
    if op == "-":
        return arg if value is None else value
    if op in (":?", "?"):
        if value is None or (op == ":?" and not value):
            raise InterpolationError(f"required variable {name} is missing: {arg}")
        return value
    if op == ":+":
        return arg if value else ""
    return "" if value is None else arg


def interpolate(text: str, env: Mapping[str, str], seen: list[tuple[str, str | None]] | None = None) -> str:
    """Resolve compose interpolation in `text` with `env` as the environment and no .env file.

    `seen` collects each (variable, default) occurrence; default is None where none is given.
    """
    collected = [] if seen is None else seen
    return TEMPLATE.sub(lambda match: _substitute(match, env, collected), text)


def _resolve(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_resolve(item, env) for item in node]
    if isinstance(node, dict):
        return {key: _resolve(value, env) for key, value in node.items()}
    return node


def raw_compose(path: Path = COMPOSE_PATH) -> Any:
    """The compose file as YAML (anchors and merge keys resolved), before interpolation."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def load_compose(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The compose file after YAML anchors and merge keys, interpolated with `env` (default: empty)."""
    return _resolve(raw_compose(), env or {})


def read_env_file(path: Path) -> dict[str, str]:
    """A compose env file's variables: ``KEY=value`` lines taken as they are; blank lines and
    ``#`` comments skipped."""
    variables: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            key, _, value = stripped.partition("=")
            variables[key.strip()] = value.strip()
    return variables


def dev_variables() -> dict[str, str]:
    """``dev.env``: the variables of the development stack (public values)."""
    return read_env_file(DEV_ENV_PATH)


def env_file_variables(service: Mapping[str, Any]) -> dict[str, str]:
    """The variables a service's ``env_file`` entries give it (paths relative to the compose
    file), later files overriding earlier ones; its ``environment`` overrides them all."""
    files = service.get("env_file") or []
    variables: dict[str, str] = {}
    for entry in [files] if isinstance(files, str) else files:
        variables.update(read_env_file(COMPOSE_PATH.parent / entry))
    return variables


def environment(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's environment in either compose form (mapping or list of KEY=VALUE)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def command_text(service: Mapping[str, Any]) -> str:
    """A service's command as one string."""
    value = service.get("command") or ""
    return " ".join(value) if isinstance(value, list) else str(value)


def container_ports(service: Mapping[str, Any]) -> set[int]:
    """Ports the service's containers declare: `expose` plus the container side of `ports`."""
    published = [entry["target"] if isinstance(entry, dict) else str(entry).split("/")[0].rsplit(":", 1)[-1]
                 for entry in service.get("ports", [])]
    return {int(str(entry).split("/")[0]) for entry in service.get("expose", [])} | {int(p) for p in published}


def depends_on(service: Mapping[str, Any]) -> dict[str, str]:
    """Dependency name -> condition (short list form means service_started)."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def image_is_pinned(image: str) -> bool:
    """True for `name:tag` (tag not `latest`) or `name@sha256:...`."""
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    return "@sha256:" in image or tag not in ("", "latest")
