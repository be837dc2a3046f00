"""docker-compose.yml's two worlds, checked by compose itself: the dev profile with dev.env, and a
production .env with S3 on AWS, no bundled store and secrets of its own.

`docker-compose config` (Debian's docker-compose 1.29; `make test` installs it) validates and
interpolates the file without a Docker daemon. Each run gets only the given env file and a bare
environment, so neither a `.env` in the checkout nor the caller's variables can leak in.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from scripts.compose import (
    COMPOSE_PATH,
    DEV_ENV_PATH,
    depends_on,
    dev_variables,
    environment,
    raw_compose,
    read_env_file,
)

ROOT = COMPOSE_PATH.parent
DOCKER_COMPOSE = shutil.which("docker-compose")
needs_compose = pytest.mark.skipif(DOCKER_COMPOSE is None, reason="docker-compose is not installed (make test installs it)")

#: The variables without which nothing starts outside the dev profile: no public default for any.
REQUIRED = {
    "AIRFLOW_FERNET_KEY",
    "AIRFLOW_JWT_SECRET",
    "AIRFLOW_API_SECRET_KEY",
    "_AIRFLOW_WWW_USER_PASSWORD",
    "POSTGRES_PASSWORD",
    "AIRFLOW_CONN_AWS_DEFAULT",
    "EVALUATION_INPUT_URI",
    "EVALUATION_OUTPUT_URI",
}
DEV_SERVICES = {"s3", "s3-init"}
#: Services that run the judge's calls (tasks, batch triggers): the provider's variables reach them.
PROVIDER_SERVICES = ("airflow-worker", "airflow-triggerer")
#: A production .env: S3 on AWS through a role the connection assumes (no endpoint, no keys).
PRODUCTION = {
    "AIRFLOW_UID": "1000",
    "AIRFLOW_FERNET_KEY": "Ud6nkd3iqa5M2bnnSPZRWDMoALwI_gDUxfvFvTjmu6Q=",
    "AIRFLOW_JWT_SECRET": "a" * 128,
    "AIRFLOW_API_SECRET_KEY": "b" * 64,
    "_AIRFLOW_WWW_USER_PASSWORD": "admin-password-of-this-test",
    "POSTGRES_PASSWORD": "postgres-password-of-this-test",
    "AIRFLOW_CONN_AWS_DEFAULT": json.dumps({
        "conn_type": "aws",
        "extra": {"region_name": "eu-west-1", "role_arn": "arn:aws:iam::123456789012:role/llm-evaluation"},
    }),
    "EVALUATION_INPUT_URI": "s3://acme-llm-logs/raw",
    "EVALUATION_OUTPUT_URI": "s3://acme-llm-evaluation/curated",
    "EVALUATION_JUDGE_MODEL": "anthropic/claude-3-5-sonnet-20241022",
}


def _write_env(path: Path, variables: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in variables.items()), encoding="utf-8")
    return path


def _config(env_file: Path, *profiles: str) -> subprocess.CompletedProcess[str]:
    assert DOCKER_COMPOSE is not None
    argv = [DOCKER_COMPOSE, "--project-directory", str(ROOT), "-f", str(COMPOSE_PATH), "--env-file", str(env_file)]
    for profile in profiles:
        argv += ["--profile", profile]
    return subprocess.run([*argv, "config"], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(env_file.parent)})


def _resolved(env_file: Path, *profiles: str) -> dict[str, Any]:
    result = _config(env_file, *profiles)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def _values(node: Any) -> list[str]:
    """Every string value of the raw compose file: what compose interpolates (not its comments)."""
    if isinstance(node, dict):
        return [text for value in node.values() for text in _values(value)]
    if isinstance(node, list):
        return [text for item in node for text in _values(item)]
    return [node] if isinstance(node, str) else []


def _required_in_file() -> set[str]:
    return {name for text in _values(raw_compose())
            for name in re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*):\?", text)}


# --- without Docker's tools ------------------------------------------------------------------------


def test_every_secret_is_required_and_has_no_default_anywhere() -> None:
    assert _required_in_file() == REQUIRED
    text = "\n".join(_values(raw_compose()))
    for name in REQUIRED:
        assert not re.search(rf"\$\{{{name}:?-", text), f"{name} has a default in docker-compose.yml"
    assert "CHANGE-ME" not in text


def test_nothing_outside_the_dev_profile_depends_on_it() -> None:
    services = raw_compose()["services"]
    in_dev = {name for name, service in services.items() if "dev" in (service.get("profiles") or [])}
    assert in_dev == DEV_SERVICES
    for name, service in services.items():
        if name in in_dev:
            continue
        wanted = set(depends_on(service)) & in_dev
        assert not wanted, f"{name} depends on {sorted(wanted)}, which only the dev profile starts"


def test_dev_env_sets_every_required_variable_and_only_compose_variables() -> None:
    dev = dev_variables()
    assert dev.get("COMPOSE_PROFILES") == "dev"
    assert all(dev.get(name) for name in REQUIRED), sorted(name for name in REQUIRED if not dev.get(name))
    documented = read_env_file(ROOT / ".env.example")
    assert set(dev) - {"COMPOSE_PROFILES"} <= set(documented), "dev.env sets variables the file ignores"
    # .env.example, the production template, carries no secret at all.
    assert not any(documented[name] for name in REQUIRED), "a secret has a value in .env.example"


def test_providers_example_is_only_comments_with_one_block_per_major_provider() -> None:
    text = (ROOT / "providers.env.example").read_text(encoding="utf-8")
    assert read_env_file(ROOT / "providers.env.example") == {}, "the example must set nothing"
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_API_KEY", "AZURE_API_BASE", "AZURE_API_VERSION",
                     "AWS_REGION_NAME", "VERTEXAI_PROJECT", "GEMINI_API_KEY", "MISTRAL_API_KEY", "OPENAI_API_BASE"):
        assert re.search(rf"^# {variable}=", text, re.MULTILINE), f"no commented example of {variable}"
    assert "providers.env" in (ROOT / ".gitignore").read_text().split()


# --- docker-compose config -------------------------------------------------------------------------


@needs_compose
def test_the_dev_profile_validates_with_dev_env() -> None:
    resolved = _resolved(DEV_ENV_PATH, "dev")
    services = resolved["services"]
    assert DEV_SERVICES <= set(services)
    assert all(services[name].get("profiles") == ["dev"] for name in DEV_SERVICES)
    connection = json.loads(services["airflow-worker"]["environment"]["AIRFLOW_CONN_AWS_DEFAULT"])
    assert connection["extra"]["endpoint_url"] == "http://s3:8333"
    assert services["s3"]["environment"]["S3_ACCESS_KEY"] == connection["login"]


@needs_compose
def test_a_production_env_validates_without_the_bundled_store(tmp_path: Path) -> None:
    services = _resolved(_write_env(tmp_path / "production.env", PRODUCTION))["services"]
    for name, service in services.items():
        if name in DEV_SERVICES:
            continue
        assert not set(depends_on(service)) & DEV_SERVICES, name
    for name in ("airflow-worker", "airflow-scheduler", "airflow-init"):
        env = services[name]["environment"]
        connection = json.loads(env["AIRFLOW_CONN_AWS_DEFAULT"])
        assert "endpoint_url" not in connection["extra"], "production S3 goes to AWS's endpoint"
        assert connection["extra"]["role_arn"].endswith(":role/llm-evaluation")
        assert "login" not in connection
        assert env["EVALUATION_OUTPUT_URI"] == PRODUCTION["EVALUATION_OUTPUT_URI"]
        assert env["AIRFLOW__CORE__FERNET_KEY"] == PRODUCTION["AIRFLOW_FERNET_KEY"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == PRODUCTION["POSTGRES_PASSWORD"]


@needs_compose
def test_missing_secrets_stop_the_config_naming_each(tmp_path: Path) -> None:
    """Compose names the first missing variable; setting each one named in turn must name them all."""
    env = {key: value for key, value in PRODUCTION.items() if key not in REQUIRED}
    named: list[str] = []
    for _ in range(len(REQUIRED) + 1):
        result = _config(_write_env(tmp_path / "partial.env", env))
        if result.returncode == 0:
            break
        # `... in service "NAME": <the message after :? in the file>`
        message = re.search(r'in service "[^"]+": (.*)$', result.stderr.strip())
        assert message, result.stderr
        missing = [name for name in REQUIRED - set(named) if message.group(1).startswith(f"set {name} in .env")]
        assert len(missing) == 1, message.group(1)
        named.append(missing[0])
        env[missing[0]] = PRODUCTION[missing[0]]
    assert set(named) == REQUIRED


@needs_compose
def test_provider_variables_reach_the_judges_services(tmp_path: Path) -> None:
    providers = _write_env(tmp_path / "providers.env", {
        "ANTHROPIC_API_KEY": "sk-ant-test", "AZURE_API_BASE": "https://judge.openai.azure.com",
        "AWS_REGION_NAME": "eu-central-1",
    })
    env_file = _write_env(tmp_path / "production.env", {**PRODUCTION, "PROVIDERS_ENV_FILE": str(providers)})
    services = _resolved(env_file)["services"]
    for name in PROVIDER_SERVICES:
        env = environment(services[name])
        assert env["ANTHROPIC_API_KEY"] == "sk-ant-test", name
        assert env["AZURE_API_BASE"] == "https://judge.openai.azure.com", name
        assert env["AWS_REGION_NAME"] == "eu-central-1", name
    # The components that call no provider do not get its keys.
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor"):
        assert "ANTHROPIC_API_KEY" not in environment(services[name]), name


@needs_compose
def test_run_options_and_judge_limits_reach_the_worker_from_env(tmp_path: Path) -> None:
    """A production .env's EVALUATION_JUDGE_RPM / EVALUATION_CONCURRENCY reach the worker as they
    are, and LLM_JUDGE_RPM / _TPM the llm_judge connection's extra; left out, they are empty."""
    tuned = {**PRODUCTION, "EVALUATION_JUDGE_RPM": "5000", "EVALUATION_CONCURRENCY": "32",
             "LLM_JUDGE_RPM": "4000", "LLM_JUDGE_TPM": "2000000"}
    worker = environment(_resolved(_write_env(tmp_path / "tuned.env", tuned))["services"]["airflow-worker"])
    assert (worker["EVALUATION_JUDGE_RPM"], worker["EVALUATION_CONCURRENCY"]) == ("5000", "32")
    assert json.loads(worker["AIRFLOW_CONN_LLM_JUDGE"])["extra"] == {"rpm": "4000", "tpm": "2000000"}
    plain = environment(_resolved(_write_env(tmp_path / "plain.env", PRODUCTION))["services"]["airflow-worker"])
    assert plain["EVALUATION_JUDGE_RPM"] in ("", None) and plain["EVALUATION_CONCURRENCY"] in ("", None)
