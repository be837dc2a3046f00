"""Structure of the deployment files: docker-compose.yml, Dockerfile and .env.example.

Docker is not available where the tests run, so these checks read the files: the YAML as compose
would see it after interpolating its defaults (or a given environment), and the Dockerfile's
instructions. They cross-check what the services must agree on: host names and ports, credentials,
buckets, the pool, and the Airflow version.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from evaluation.calling.fleetrate import rate_settings
from scripts.compose import (
    COMPOSE_PATH,
    TEMPLATE,
    InterpolationError,
    command_text,
    container_ports,
    depends_on,
    dev_variables,
    environment,
    image_is_pinned,
    interpolate,
    load_compose,
    raw_compose,
    read_env_file,
)

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE_PATH = ROOT / "Dockerfile"
ENV_EXAMPLE_PATH = ROOT / ".env.example"
REQUIREMENTS_PATH = ROOT / "requirements.txt"

AIRFLOW_SERVICES = (
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-worker",
    "airflow-triggerer",
    "airflow-init",
)
S3_SERVICE = "s3"
REQUIRED_SERVICES = ("postgres", "redis", *AIRFLOW_SERVICES, S3_SERVICE, "s3-init")
BUCKETS = ("llm-logs", "llm-evaluation")
SOURCE_MOUNTS = {
    "./dags": "/opt/airflow/dags",
    "./plugins": "/opt/airflow/plugins",
    "./evaluation": "/opt/airflow/evaluation",
}
AIRFLOW_HOME = "/opt/airflow"

def env_example() -> dict[str, str]:
    return read_env_file(ENV_EXAMPLE_PATH)


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with comments dropped and continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE_PATH.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, args = full.partition(" ")
        instructions.append((keyword.upper(), args.strip()))
    assert not pending, "Dockerfile ends inside a continued line"
    return instructions


def requirement_pin(distribution: str) -> str:
    for line in REQUIREMENTS_PATH.read_text(encoding="utf-8").splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and name.strip().lower() == distribution:
            return version.strip()
    raise AssertionError(f"{distribution} is not pinned in requirements.txt")


def dev_compose(overrides: dict[str, str] | None = None) -> dict[str, Any]:
    """The compose file as `docker compose --env-file dev.env` sees it, with `overrides`."""
    return load_compose({**dev_variables(), **(overrides or {})})


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dev_compose()


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


# --- interpolation and .env.example -------------------------------------------------------------


def test_interpolation_helper_follows_compose_rules() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("$$HOME ${SET} $SET ${UNSET:-d} ${EMPTY:-d} ${EMPTY-d} ${SET:+alt}", env) == (
        "$HOME x x d d  alt"
    )
    with pytest.raises(InterpolationError):
        interpolate("echo $(id -u)", env)
    with pytest.raises(InterpolationError):
        interpolate("${NEEDED:?set it}", env)


def _compose_strings(node: Any) -> list[str]:
    """Every string value of the raw compose file: what compose interpolates (YAML comments are not)."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [text for item in node for text in _compose_strings(item)]
    if isinstance(node, dict):
        return [text for value in node.values() for text in _compose_strings(value)]
    return []


def _raw_compose_strings() -> list[str]:
    return _compose_strings(raw_compose(COMPOSE_PATH))


def test_compose_file_interpolates_cleanly() -> None:
    """Every `$` is valid compose syntax, and shell variables are escaped as `$$`.

    An unbraced `$NAME` is legal for compose but almost always a shell variable that compose would
    replace (usually by an empty string) before the shell sees it.
    """
    for text in _raw_compose_strings():
        interpolate(text, dev_variables())
        unbraced = [match.group(0) for match in TEMPLATE.finditer(text) if match.group("named")]
        assert not unbraced, f"compose, not the shell, would interpolate {unbraced} in {text[:60]!r}"


def test_every_compose_variable_is_documented_with_the_same_default() -> None:
    seen: list[tuple[str, str | None]] = []
    for text in _raw_compose_strings():
        interpolate(text, dev_variables(), seen)
    documented = env_example()

    used = {name for name, _ in seen}
    assert used - documented.keys() == set(), "variables missing from .env.example"
    assert documented.keys() - used == set(), ".env.example lists variables docker-compose.yml ignores"

    defaults: dict[str, set[str]] = {}
    for name, default in seen:
        if default is not None:
            defaults.setdefault(name, set()).add(default)
    for name, values in defaults.items():
        assert len(values) == 1, f"{name} has different defaults in docker-compose.yml: {sorted(values)}"
        assert documented[name] == next(iter(values)), (
            f".env.example and docker-compose.yml disagree on {name}"
        )


# --- services -------------------------------------------------------------------------------------


def test_required_services_exist(services: dict[str, Any]) -> None:
    missing = [name for name in REQUIRED_SERVICES if name not in services]
    assert not missing, f"missing services: {missing}"


def test_dependencies_name_defined_services_with_valid_conditions(services: dict[str, Any]) -> None:
    valid = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, service in services.items():
        for dependency, condition in depends_on(service).items():
            assert dependency in services, f"{name} depends on undefined service {dependency}"
            assert condition in valid, f"{name}: unknown condition {condition}"
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], (
                    f"{name} waits for {dependency}'s missing healthcheck"
                )


def test_startup_order(services: dict[str, Any]) -> None:
    assert depends_on(services["s3-init"]).get(S3_SERVICE) == "service_healthy"
    init_deps = depends_on(services["airflow-init"])
    # The bucket job exists only in the dev profile: airflow-init waits for the buckets instead.
    assert "s3-init" not in init_deps
    assert "check_storage.py" in command_text(services["airflow-init"])
    assert init_deps.get("postgres") == "service_healthy"
    assert init_deps.get("redis") == "service_healthy"
    for name in AIRFLOW_SERVICES:
        if name == "airflow-init":
            continue
        deps = depends_on(services[name])
        assert deps.get("airflow-init") == "service_completed_successfully", name
        assert deps.get("postgres") == "service_healthy", name
        assert deps.get("redis") == "service_healthy", name


def test_healthchecks(services: dict[str, Any]) -> None:
    for name in ("postgres", "redis", S3_SERVICE, "airflow-apiserver", "airflow-scheduler", "airflow-worker"):
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
    assert "pg_isready" in str(services["postgres"]["healthcheck"]["test"])
    assert "/api/v2/version" in str(services["airflow-apiserver"]["healthcheck"]["test"])
    assert services["airflow-apiserver"]["command"] == "api-server"
    assert 8080 in container_ports(services["airflow-apiserver"])
    assert services["airflow-worker"]["command"] == "celery worker"


def test_airflow_services_share_the_common_definition(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    common = compose["x-airflow-common"]
    common_env = environment(common)
    assert "build" not in common, "every Airflow service would build the image again"
    airflow_names = [name for name in services if name.startswith("airflow-")]
    assert set(AIRFLOW_SERVICES) <= set(airflow_names)
    builders = [name for name, service in services.items() if "build" in service]
    assert builders == ["airflow-init"], f"one image build expected, found {builders}"
    assert services["airflow-init"]["build"] == "."
    for name in airflow_names:
        service = services[name]
        assert service.get("image") == common["image"], f"{name} does not run the built image"
        env = environment(service)
        drifted = {key for key, value in common_env.items() if env.get(key) != value}
        assert not drifted, f"{name} drops or overrides common environment: {sorted(drifted)}"
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name
    for name in AIRFLOW_SERVICES:
        if name != "airflow-init":
            assert services[name]["user"] == common["user"] == "50000:0", name


def test_common_environment_settings(compose: dict[str, Any]) -> None:
    env = environment(compose["x-airflow-common"])
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"].lower() == "false"
    # DAGs start unpaused, so a REST-triggered run of a fresh stack does not sit in `queued`.
    assert env["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"] == "false"
    assert dev_compose({"AIRFLOW_DAGS_PAUSED_AT_CREATION": "true"})["x-airflow-common"]["environment"][
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"] == "true"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env["AIRFLOW__CORE__AUTH_MANAGER"].endswith(("SimpleAuthManager", "FabAuthManager"))
    for secret in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY", "AIRFLOW__CORE__FERNET_KEY"):
        assert env[secret], f"dev.env leaves {secret} empty"
    assert len(env["AIRFLOW__API_AUTH__JWT_SECRET"].encode()) >= 64, "Airflow asks for a JWT secret of 64 bytes"
    assert env["EVALUATION_JUDGE_MODEL"] == "offline/lexical"


def test_database_and_broker_urls_name_their_services(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    env = environment(compose["x-airflow-common"])
    postgres_env = environment(services["postgres"])

    for key, scheme in (
        ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "postgresql+psycopg"),
        ("AIRFLOW__CELERY__RESULT_BACKEND", "db+postgresql+psycopg"),
    ):
        url = urlsplit(env[key])
        assert url.scheme == scheme, key
        assert url.hostname in services, f"{key} points at undefined host {url.hostname}"
        assert services[url.hostname]["image"].startswith("postgres:"), key
        assert (url.port or 5432) == 5432, key
        assert url.username == postgres_env["POSTGRES_USER"], key
        assert url.password == postgres_env["POSTGRES_PASSWORD"], key
        assert url.path.lstrip("/") == postgres_env["POSTGRES_DB"], key

    broker = urlsplit(env["AIRFLOW__CELERY__BROKER_URL"])
    assert broker.scheme == "redis"
    assert broker.hostname in services, f"broker points at undefined host {broker.hostname}"
    assert services[broker.hostname]["image"].startswith("redis:")
    assert (broker.port or 6379) in container_ports(services[broker.hostname])


def test_execution_api_url_names_the_api_server(compose: dict[str, Any], services: dict[str, Any]) -> None:
    url = urlsplit(environment(compose["x-airflow-common"])["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    assert url.hostname == "airflow-apiserver"
    assert url.port in container_ports(services["airflow-apiserver"])
    assert url.path == "/execution/"


def _aws_connection(compose: dict[str, Any]) -> dict[str, Any]:
    return json.loads(environment(compose["x-airflow-common"])["AIRFLOW_CONN_AWS_DEFAULT"])


def test_aws_connection_points_at_the_s3_service(compose: dict[str, Any], services: dict[str, Any]) -> None:
    connection = _aws_connection(compose)
    assert connection["conn_type"] == "aws"
    endpoint = urlsplit(connection["extra"]["endpoint_url"])
    assert endpoint.scheme == "http"
    assert endpoint.hostname in services, f"endpoint_url names undefined service {endpoint.hostname}"
    store = services[endpoint.hostname]
    assert endpoint.port in container_ports(store), f"{endpoint.hostname} does not expose {endpoint.port}"
    listen_flags = re.findall(r"-s3\.port=(\d+)", command_text(store))
    assert listen_flags and all(int(port) == endpoint.port for port in listen_flags), "S3 listens elsewhere"
    assert connection["extra"]["region_name"] == "us-east-1"


def test_s3_credentials_agree_everywhere(compose: dict[str, Any]) -> None:
    """dev.env's aws_default connection carries the keys the bundled store and its job take."""
    services = compose["services"]
    connection = _aws_connection(compose)
    store_env = environment(services[S3_SERVICE])
    init_env = environment(services["s3-init"])
    assert connection["login"] == store_env["S3_ACCESS_KEY"] == init_env["AWS_ACCESS_KEY_ID"]
    assert connection["password"] == store_env["S3_SECRET_KEY"] == init_env["AWS_SECRET_ACCESS_KEY"]
    assert connection["login"] and connection["password"]
    other = dev_compose({"S3_ACCESS_KEY": "key-from-env", "S3_SECRET_KEY": "secret-from-env"})
    assert environment(other["services"][S3_SERVICE])["S3_ACCESS_KEY"] == "key-from-env"


def test_s3_store_definition(services: dict[str, Any]) -> None:
    store = services[S3_SERVICE]
    assert image_is_pinned(store["image"])
    script = command_text(store)
    for variable in ("S3_ACCESS_KEY", "S3_SECRET_KEY"):
        assert f"${{{variable}}}" in script, f"the store does not take {variable} from its environment"
    named = {str(volume).split(":", 1)[0] for volume in store.get("volumes", [])}
    assert named and all(not source.startswith((".", "/")) for source in named), "use a named volume"


def test_s3_init_creates_the_buckets(compose: dict[str, Any], services: dict[str, Any]) -> None:
    script = command_text(services["s3-init"])
    assert image_is_pinned(services["s3-init"]["image"])
    endpoint = _aws_connection(compose)["extra"]["endpoint_url"]
    endpoints = set(re.findall(r"--endpoint-url\s+(\S+)", script))
    assert endpoints == {endpoint}, f"s3-init talks to {endpoints}, Airflow to {endpoint}"
    assert re.search(r"\bs3 mb\b", script)
    for bucket in BUCKETS:
        assert re.search(rf"(?<![\w-]){re.escape(bucket)}(?![\w-])", script), (
            f"s3-init does not create {bucket}"
        )
    assert services["s3-init"].get("restart", "no") == "no"


def test_default_uris_live_in_created_buckets(compose: dict[str, Any]) -> None:
    env = environment(compose["x-airflow-common"])
    assert env["EVALUATION_INPUT_URI"] == "s3://llm-logs/raw"
    assert env["EVALUATION_OUTPUT_URI"] == "s3://llm-evaluation/curated"
    for key in ("EVALUATION_INPUT_URI", "EVALUATION_OUTPUT_URI"):
        uri = urlsplit(env[key])
        assert uri.scheme == "s3" and uri.netloc in BUCKETS, f"{key}={env[key]} is not in a created bucket"


def test_judge_connection_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluation_airflow import credentials_of, judge_rate_limits

    offline = json.loads(environment(dev_compose()["x-airflow-common"])["AIRFLOW_CONN_LLM_JUDGE"])
    assert offline == {"conn_type": "generic", "password": "", "host": "", "extra": {"rpm": "", "tpm": ""}}
    monkeypatch.setenv("AIRFLOW_CONN_LLM_JUDGE", json.dumps(offline))
    assert judge_rate_limits() == {}  # empty: no limit
    configured = dev_compose({"LLM_API_KEY": "sk-test", "LLM_API_BASE": "http://judge:4000/v1",
                              "LLM_JUDGE_RPM": "5000", "LLM_JUDGE_TPM": "2000000"})
    value = environment(configured["x-airflow-common"])["AIRFLOW_CONN_LLM_JUDGE"]
    monkeypatch.setenv("AIRFLOW_CONN_LLM_JUDGE", value)  # read by Airflow, as a task reads it
    from airflow.sdk.bases.hook import BaseHook

    assert credentials_of(BaseHook.get_connection("llm_judge"), None) == ("sk-test", "http://judge:4000/v1")
    assert judge_rate_limits() == {"judge_rpm": 5000.0, "judge_tpm": 2000000.0}


def test_every_run_options_variable_reaches_every_airflow_service() -> None:
    """Each EVALUATION_<OPTION> of .env (of a run, a comparison, a calibration, the clean-up) reaches
    the tasks, the triggerer's and the scheduler's."""
    from evaluation.contract.options import CALIBRATE_OPTIONS, COMPARE_OPTIONS, RETENTION_OPTIONS, RUN_OPTIONS

    found = {str(o.env): o for o in (*RUN_OPTIONS, *COMPARE_OPTIONS, *CALIBRATE_OPTIONS, *RETENTION_OPTIONS) if o.env}
    given = {env: f"value-of-{o.name}" for env, o in found.items()}
    configured = dev_compose(given)
    documented = env_example()
    text = ENV_EXAMPLE_PATH.read_text(encoding="utf-8")
    for option in found.values():
        assert option.env in documented, f"{option.env} is not in .env.example"
        if option.name not in ("input_uri", "output_uri"):  # required: no default to give
            default = option.default_text.partition(", else ")[2] or "none"
            assert f"# {option.name} (default: {default})\n{option.env}=" in text, f".env.example: {option.name}"
    for name in AIRFLOW_SERVICES:
        env = environment(configured["services"][name])
        assert {key: env.get(key) for key in given} == given, name


def test_the_judge_rate_budget_is_shared_through_the_broker() -> None:
    """Every worker's judge tasks draw from one budget in the broker's Redis; .env may name another
    Redis, or turn it off (each task then takes the limits divided by the pool's slots)."""
    env = environment(dev_compose()["services"]["airflow-worker"])
    assert rate_settings(env) == (env["AIRFLOW__CELERY__BROKER_URL"], 4.0)
    other = environment(dev_compose({"EVALUATION_RATE_REDIS_URL": "redis://rates:6379/1"})["services"]["airflow-worker"])
    assert rate_settings(other) == ("redis://rates:6379/1", 4.0)
    off = environment(dev_compose({"EVALUATION_RATE_REDIS_URL": "off", "LLM_JUDGE_POOL_SLOTS": "9"})["services"]["airflow-worker"])
    assert rate_settings(off) == (None, 9.0)


@pytest.mark.parametrize(("env", "slots"), [({}, 4), ({"LLM_JUDGE_POOL_SLOTS": "9"}, 9)])
def test_airflow_init_migrates_and_creates_the_judge_pool(env: dict[str, str], slots: int) -> None:
    init = dev_compose(env)["services"]["airflow-init"]
    script = command_text(init)
    assert re.search(r"\bairflow db migrate\b", script)
    pool = re.search(r"\bairflow pools set llm_judge (\S+) ", script)
    assert pool, "airflow-init does not create the llm_judge pool"
    assert int(pool.group(1)) == slots
    assert script.index("airflow db migrate") < script.index("airflow pools set")


def test_airflow_init_sets_the_admin_password(compose: dict[str, Any]) -> None:
    init = compose["services"]["airflow-init"]
    env = environment(init)
    users = env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"]
    assert users == f"{env['_AIRFLOW_WWW_USER_USERNAME']}:admin"
    passwords_file = env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
    mounts = [str(volume).split(":")[1] for volume in compose["x-airflow-common"]["volumes"]]
    assert any(passwords_file.startswith(target + "/") for target in mounts), "passwords file not on a volume"
    assert "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE}" in command_text(init)


def test_source_folders_are_mounted(compose: dict[str, Any]) -> None:
    volumes = [str(volume).split(":") for volume in compose["x-airflow-common"]["volumes"]]
    binds = {parts[0]: parts[1] for parts in volumes if parts[0].startswith((".", "/"))}
    assert binds == SOURCE_MOUNTS
    for source in binds:
        assert (ROOT / source).is_dir(), f"{source} is mounted but missing from the repository"
    declared = set(compose.get("volumes") or {})
    for name, service in {"x-airflow-common": compose["x-airflow-common"], **compose["services"]}.items():
        for volume in service.get("volumes", []):
            source = str(volume).split(":", 1)[0]
            if not source.startswith((".", "/")):
                assert source in declared, f"{name} uses undeclared volume {source}"
    pythonpath = environment(compose["x-airflow-common"])["PYTHONPATH"].split(":")
    assert AIRFLOW_HOME in pythonpath
    assert Path(SOURCE_MOUNTS["./evaluation"]).parent == Path(AIRFLOW_HOME)


def test_every_image_is_pinned(compose: dict[str, Any], services: dict[str, Any]) -> None:
    for name, service in services.items():
        assert "image" in service or "build" in service, f"{name} has neither image nor build"
        if "image" in service:
            assert image_is_pinned(service["image"]), f"{name} uses an unpinned image {service['image']}"
    assert not image_is_pinned("redis")
    assert not image_is_pinned("chrislusf/seaweedfs:latest")
    assert image_is_pinned("localhost:5000/airflow:1.0")


def test_no_pip_additional_requirements(compose: dict[str, Any]) -> None:
    assert "_PIP_ADDITIONAL_REQUIREMENTS" not in json.dumps(compose)
    assert all("_PIP_ADDITIONAL_REQUIREMENTS" not in args for _, args in dockerfile_instructions())


# --- Dockerfile -----------------------------------------------------------------------------------


def test_dockerfile_builds_on_the_pinned_airflow_image() -> None:
    instructions = dockerfile_instructions()
    froms = [args for keyword, args in instructions if keyword == "FROM"]
    assert len(froms) == 1, "one stage expected"
    match = re.fullmatch(r"apache/airflow:(3\.3\.\d+)(?:-python(\d+\.\d+))?", froms[0])
    assert match, f"unexpected base image {froms[0]}"
    assert match.group(1) == requirement_pin("apache-airflow"), "base image and requirements.txt disagree"
    assert match.group(2) == "3.11", "requirements.txt is resolved for Python 3.11"


def test_dockerfile_installs_requirements_as_airflow_user() -> None:
    instructions = dockerfile_instructions()
    copies = [
        (index, args.split()) for index, (keyword, args) in enumerate(instructions) if keyword == "COPY"
    ]
    requirement_copies = [
        (index, words)
        for index, words in copies
        if "requirements.txt" in words[:-1] and not words[0].startswith("--from")
    ]
    assert requirement_copies, "requirements.txt is not copied into the image"
    copy_index, words = requirement_copies[0]
    target = words[-1] if not words[-1].endswith("/") else words[-1] + "requirements.txt"

    installs = [
        (index, args)
        for index, (keyword, args) in enumerate(instructions)
        if keyword == "RUN" and "pip install" in args and re.search(rf"-r\s+{re.escape(target)}(\s|$)", args)
    ]
    assert installs, f"no RUN pip install -r {target}"
    install_index, _ = installs[0]
    assert install_index > copy_index
    users = [
        args
        for index, (keyword, args) in enumerate(instructions)
        if keyword == "USER" and index < install_index
    ]
    assert not users or users[-1] == "airflow", "pip must run as the airflow user"


def test_dockerfile_bakes_in_the_evaluation_package() -> None:
    copies = [args.split() for keyword, args in dockerfile_instructions() if keyword == "COPY"]
    evaluation = [words for words in copies if any(word.rstrip("/") == "evaluation" for word in words[:-1])]
    assert evaluation, "evaluation/ is not copied into the image"
    assert evaluation[0][-1].rstrip("/") == SOURCE_MOUNTS["./evaluation"]


def test_published_ports_bind_loopback_by_default(services: dict[str, Any]) -> None:
    published = {name: service["ports"] for name, service in services.items() if service.get("ports")}
    assert set(published) == {"airflow-apiserver", S3_SERVICE}
    for name, ports in published.items():
        for entry in ports:
            host_ip = str(entry).split(":")[0]
            assert host_ip == "127.0.0.1", f"{name} publishes {entry} beyond loopback"
    exposed = dev_compose({"PUBLISH_ADDRESS": "0.0.0.0"})["services"]["airflow-apiserver"]["ports"]
    assert exposed == ["0.0.0.0:8080:8080"]


def test_the_image_carries_no_test_or_lint_tools_and_checks_its_install() -> None:
    instructions = dockerfile_instructions()
    assert not any("requirements-dev" in args for _, args in instructions)
    pinned = {line.split("==")[0].lower() for line in REQUIREMENTS_PATH.read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    assert not pinned & {"pytest", "pytest-timeout", "ruff", "mypy", "moto", "duckdb"}
    assert {"apache-airflow-providers-celery", "celery", "asyncpg", "psycopg", "redis"} <= pinned
    runs = [(index, args) for index, (keyword, args) in enumerate(instructions) if keyword == "RUN"]
    checks = [index for index, args in runs if "check_install.py" in args]
    copies = [index for index, (keyword, args) in enumerate(instructions) if keyword == "COPY"]
    assert checks and checks[-1] > max(copies), "the install check must run on the finished image"
