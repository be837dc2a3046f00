"""deploy/helm/values.yaml agrees with the image and the compose stack.

The chart's values.schema.json (Apache-2.0, some 800 kB) is not shipped: helm validates the values
against it at every install, and these values were validated against chart 1.22.0's schema when
written. Set AIRFLOW_CHART_SCHEMA to a copy of chart/values.schema.json to validate them here too.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from scripts.compose import dev_variables, environment, load_compose

ROOT = Path(__file__).resolve().parents[1]
VALUES = yaml.safe_load((ROOT / "deploy/helm/values.yaml").read_text(encoding="utf-8"))
IRSA = "eks.amazonaws.com/role-arn"


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
    roles = {VALUES[component]["serviceAccount"]["annotations"][IRSA] for component in ("workers", "triggerer", "apiServer")}
    assert len(roles) == 1 and next(iter(roles)).startswith("arn:aws:iam::")


@pytest.mark.skipif(not os.environ.get("AIRFLOW_CHART_SCHEMA"), reason="AIRFLOW_CHART_SCHEMA names no copy of the chart's schema")
def test_the_values_validate_against_the_charts_schema() -> None:
    schema = json.loads(Path(os.environ["AIRFLOW_CHART_SCHEMA"]).read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{list(error.path)}: {error.message}" for error in validator.iter_errors(VALUES)]
    assert not errors, errors
    misspelt = {**VALUES, "workers": {**VALUES["workers"], "replicass": 3}}
    assert list(validator.iter_errors(misspelt)), "the schema does not catch an unknown key"
