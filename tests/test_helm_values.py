"""deploy/helm/values.yaml agrees with the image, the compose stack and the chart's own rules.

The chart (apache-airflow/airflow, :data:`CHART_VERSION`) is not shipped. What it does with the keys
these values set is encoded here as data, each rule naming the template or release note it comes
from: the secrets it pairs (:data:`SECRET_PAIRS`), the keys it marks deprecated
(:data:`DEPRECATED`). Every connection and variable the DAGs and plugins read is found in their
code and must be provided by the values. The chart's values.schema.json (Apache-2.0, some 800 kB)
is not shipped either: set AIRFLOW_CHART_SCHEMA to a copy of chart/values.schema.json to validate
the values against it, and to check that none of them is a key the schema itself calls deprecated.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from scripts.compose import dev_variables, environment, load_compose

ROOT = Path(__file__).resolve().parents[1]
VALUES = yaml.safe_load((ROOT / "deploy/helm/values.yaml").read_text(encoding="utf-8"))
IRSA = "eks.amazonaws.com/role-arn"
#: The chart release the rules below were read from (and docs/deploy.md names).
CHART_VERSION = "1.22.0"


def _get(values: dict[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of ``values``; None when any part is missing."""
    node: Any = values
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


@dataclass(frozen=True)
class Pairing:
    """A chart rule: when ``when`` holds for the values, every key of ``needs`` must be set."""

    when: Callable[[dict[str, Any]], bool]
    needs: tuple[str, ...]
    source: str  #: the chart template the rule comes from
    why: str


#: The secrets chart 1.22.0 pairs, as its templates and values.yaml comments of earlier releases and
#: its release notes say (docs/deploy.md says what was and was not read).
SECRET_PAIRS = (
    Pairing(lambda v: bool(_get(v, "redis.enabled")) and bool(_get(v, "redis.passwordSecretName")),
            ("data.brokerUrlSecretName",), "templates/secrets/redis-secrets.yaml",
            "without a broker URL secret the chart renders the URL with a random password of its own, "
            "not the one Redis runs with (values.yaml: 'Make sure to also set data.brokerUrlSecretName')"),
    Pairing(lambda v: bool(_get(v, "pgbouncer.enabled")) and bool(_get(v, "data.metadataSecretName")),
            ("pgbouncer.configSecretName",), "templates/secrets/pgbouncer-config-secret.yaml",
            "the chart writes pgbouncer.ini from data.metadataConnection, not from the metadata secret, "
            "and a metadata secret of one's own bypasses PgBouncer"),
    Pairing(lambda v: _get(v, "postgresql.enabled") is False and not _get(v, "data.metadataConnection.host"),
            ("data.metadataSecretName",), "templates/secrets/metadata-connection-secret.yaml",
            "with the chart's Postgres off, the rendered connection names a host that does not exist"),
    Pairing(lambda v: _get(v, "redis.enabled") is False and "Celery" in str(_get(v, "executor")),
            ("data.brokerUrlSecretName",), "templates/secrets/redis-secrets.yaml",
            "with the chart's Redis off, the Celery broker is only what the broker URL secret names"),
    Pairing(lambda v: True, ("fernetKeySecretName", "jwtSecretName", "apiSecretKeySecretName"),
            "templates/secrets/fernetkey-secret.yaml, jwt-secret.yaml, api-secret-key-secret.yaml",
            "unset, the chart generates a key per install: an upgrade changes it (encrypted connections "
            "and signed tokens stop working)"),
)

#: Keys chart 1.22.0 marks deprecated, among those a deployment of this kind might set, each with
#: its replacement. The ``workers.*`` keys moved to ``workers.celery.*`` (and
#: ``workers.kubernetes.*``) in charts 1.20.0 and 1.21.0 (their release notes, "Significant
#: Changes"); ``securityContext`` and ``ingress.enabled`` are older (values.yaml: "deprecated").
DEPRECATED = {
    **{f"workers.{key}": f"workers.celery.{key}" for key in (
        "replicas", "resources", "persistence", "serviceAccount", "terminationGracePeriodSeconds", "command",
        "securityContexts", "containerLifecycleHooks", "kerberosSidecar", "kerberosInitContainer", "nodeSelector",
        "safeToEvict", "hostAliases", "priorityClassName", "runtimeClassName", "schedulerName", "extraContainers",
        "extraInitContainers", "extraVolumes", "affinity", "tolerations", "topologySpreadConstraints", "hpa", "keda",
        "volumeClaimTemplates")},
    "securityContext": "securityContexts",
    "ingress.enabled": "ingress.apiServer.enabled",
}


def _env(values: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in values.get("env", [])}


def test_the_image_and_airflow_version_match_the_dockerfile() -> None:
    base = re.search(r"^FROM apache/airflow:(\S+?)-python", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert base is not None
    assert VALUES["airflowVersion"] == VALUES["defaultAirflowTag"] == base.group(1)
    assert VALUES["images"]["airflow"]["repository"].endswith("/llm-evaluation-airflow")
    assert VALUES["executor"] in ("CeleryExecutor", "KubernetesExecutor")


def test_the_pipeline_is_configured_as_in_the_compose_stack() -> None:
    compose_worker = environment(load_compose(dev_variables())["services"]["airflow-worker"])
    assert VALUES["config"]["celery"]["celery_config_options"] == compose_worker["AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS"]
    env = _env(VALUES)
    for name in ("EVALUATION_INPUT_URI", "EVALUATION_OUTPUT_URI", "EVALUATION_JUDGE_MODEL", "LITELLM_LOCAL_MODEL_COST_MAP",
                 "LLM_JUDGE_POOL_SLOTS"):
        assert name in compose_worker and name in env, name
    # On Kubernetes the output must be on S3: no disk is shared between pods.
    assert env["EVALUATION_OUTPUT_URI"].startswith("s3://") and env["EVALUATION_INPUT_URI"].startswith("s3://")
    assert VALUES["config"]["logging"]["remote_base_log_folder"].startswith("s3://")


def test_secrets_come_from_kubernetes_secrets_and_s3_from_the_pod_role() -> None:
    from_secrets = {item["envName"] for item in VALUES["secret"]}
    assert {"AIRFLOW_CONN_AWS_DEFAULT", "AIRFLOW_CONN_LLM_JUDGE"} <= from_secrets
    assert "secretRef" in VALUES["extraEnvFrom"]
    for key in ("fernetKeySecretName", "jwtSecretName", "apiSecretKeySecretName"):
        assert VALUES[key], key
    assert VALUES["data"]["metadataSecretName"]
    text = json.dumps(VALUES)
    assert not re.search(r"AKIA[0-9A-Z]{8,}|sk-[A-Za-z0-9]{8,}", text), "a credential in the values file"
    roles = {_get(VALUES, f"{component}.serviceAccount.annotations")[IRSA]
             for component in ("workers.celery", "triggerer", "apiServer")}
    assert len(roles) == 1 and next(iter(roles)).startswith("arn:aws:iam::")


def _paths(values: Any, prefix: str = "") -> list[str]:
    """Every dotted key path the values set (lists are leaves)."""
    if not isinstance(values, dict):
        return [prefix] if prefix else []
    found = [prefix] if prefix else []
    for key, value in values.items():
        found += _paths(value, f"{prefix}.{key}" if prefix else str(key))
    return found


def broken_pairings(values: dict[str, Any]) -> list[str]:
    """The chart's secret pairings (:data:`SECRET_PAIRS`) the values break, each saying why."""
    return [f"{need} ({rule.source}): {rule.why}" for rule in SECRET_PAIRS if rule.when(values)
            for need in rule.needs if not _get(values, need)]


def deprecated_keys(values: dict[str, Any]) -> list[str]:
    """The keys of :data:`DEPRECATED` the values set, each with its replacement."""
    return [f"{path} -> {DEPRECATED[path]}" for path in _paths(values) if path in DEPRECATED]


def test_every_secret_the_chart_pairs_is_set_together() -> None:
    assert not broken_pairings(VALUES), broken_pairings(VALUES)
    # The rules catch what the chart would break: the broker's password without its URL, PgBouncer
    # with a metadata secret of one's own and no pgbouncer.ini for it.
    unpaired = {**VALUES, "data": {k: v for k, v in VALUES["data"].items() if k != "brokerUrlSecretName"}}
    assert any(problem.startswith("data.brokerUrlSecretName") for problem in broken_pairings(unpaired))
    bypassed = {**VALUES, "pgbouncer": {"enabled": True}}
    assert any(problem.startswith("pgbouncer.configSecretName") for problem in broken_pairings(bypassed))


def test_pgbouncer_is_off_or_really_used() -> None:
    if _get(VALUES, "pgbouncer.enabled"):
        assert _get(VALUES, "pgbouncer.configSecretName"), "PgBouncer on needs a pgbouncer.ini naming the RDS host"
    else:
        assert _get(VALUES, "data.metadataSecretName"), "PgBouncer off: the metadata connection is the database's"


def test_no_key_the_chart_marks_deprecated() -> None:
    assert not deprecated_keys(VALUES), deprecated_keys(VALUES)
    assert _get(VALUES, "workers.celery.replicas") and _get(VALUES, "workers.celery.serviceAccount.annotations")
    old_style = {**VALUES, "workers": {"replicas": 4, "resources": {}}}
    assert deprecated_keys(old_style) == ["workers.replicas -> workers.celery.replicas",
                                          "workers.resources -> workers.celery.resources"]


#: Where the DAGs and plugins name a connection: a default of ``os.environ.get("..._CONN_ID", id)``,
#: or a hook's ``*conn_id="id"`` argument.
_CONN_ID = re.compile(r'_CONN_ID"\s*,\s*"(?P<default>\w+)"\)|conn_id\s*=\s*"(?P<literal>\w+)"')
#: Where they read an Airflow Variable.
_VARIABLE = re.compile(r"""Variable\.get\(\s*["'](?P<name>[^"']+)|var\.(?:value|json)\.(?P<template>\w+)""")


def read_by_the_dags(pattern: re.Pattern[str]) -> set[str]:
    """The names ``pattern`` finds in the code under dags/ and plugins/."""
    found = set()
    for path in sorted([*(ROOT / "dags").glob("*.py"), *(ROOT / "plugins").glob("*.py")]):
        for match in pattern.finditer(path.read_text(encoding="utf-8")):
            found.add(next(group for group in match.groups() if group))
    return found


def provided_by(values: dict[str, Any], kind: str) -> set[str]:
    """The connections (``kind`` CONN) or variables (VAR) the values give every Airflow container,
    from Kubernetes secrets (``secret``) or plain ``env``: ``AIRFLOW_<kind>_<ID>``."""
    names = [item["envName"] for item in values.get("secret", [])] + [item["name"] for item in values.get("env", [])]
    return {name.removeprefix(f"AIRFLOW_{kind}_").lower() for name in names if name.startswith(f"AIRFLOW_{kind}_")}


def test_every_connection_and_variable_the_dags_read_is_provided() -> None:
    connections = read_by_the_dags(_CONN_ID)
    # the S3, judge and both notification connections at least: the scan finds what the code names
    assert {"aws_default", "llm_judge", "evaluation_smtp", "evaluation_webhook"} <= connections, connections
    assert connections <= provided_by(VALUES, "CONN"), connections - provided_by(VALUES, "CONN")
    assert read_by_the_dags(_VARIABLE) <= provided_by(VALUES, "VAR")
    assert VALUES["config"]["logging"]["remote_log_conn_id"] in provided_by(VALUES, "CONN")
    # a values file without the notification connections is caught
    silent = {**VALUES, "secret": [s for s in VALUES["secret"] if "EVALUATION" not in s["envName"]]}
    assert connections - provided_by(silent, "CONN") == {"evaluation_smtp", "evaluation_webhook"}


def schema_deprecated(schema: dict[str, Any], values: dict[str, Any], path: str = "") -> list[str]:
    """The keys of ``values`` whose property in the chart's ``schema`` says it is deprecated."""
    found = []
    properties = schema.get("properties", {})
    for key, value in values.items():
        prop = properties.get(key, {})
        where = f"{path}.{key}" if path else key
        if "deprecated" in str(prop.get("description", "")).lower() or prop.get("deprecated"):
            found.append(where)
        if isinstance(value, dict):
            found += schema_deprecated(prop, value, where)
    return found


@pytest.mark.skipif(not os.environ.get("AIRFLOW_CHART_SCHEMA"), reason="AIRFLOW_CHART_SCHEMA names no copy of the chart's schema")
def test_the_values_validate_against_the_charts_schema() -> None:
    schema = json.loads(Path(os.environ["AIRFLOW_CHART_SCHEMA"]).read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{list(error.path)}: {error.message}" for error in validator.iter_errors(VALUES)]
    assert not errors, errors
    misspelt = {**VALUES, "workers": {**VALUES["workers"], "replicass": 3}}
    assert list(validator.iter_errors(misspelt)), "the schema does not catch an unknown key"
    assert not schema_deprecated(schema, VALUES), schema_deprecated(schema, VALUES)
