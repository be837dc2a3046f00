"""S3 credentials as a production connection gives them: the daily DAG's ``aws_default`` keeps
only keys that may assume a role, and assumes it through STS (moto's, on the loopback server).

The tasks reach S3 through a proxy that, like S3, refuses a request signed with a key it does not
accept: here any key but a current one of the assumed role (the connection's own keys, an expired
role key). boto3's environment (keys, endpoint) is removed for the run, so nothing can reach S3
but through the connection."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import Any

import polars as pl
import pytest

from evaluation import storage
from evaluation.testing import synthetic
from evaluation.testing.s3 import AssumedRole, LocalS3
from scripts import airflow_local
from tests.reliability.faulty_proxy import FaultyProxy, ProxiedRequest, S3FaultPlan

pytestmark = pytest.mark.e2e

ROLE = "llm-evaluation-tasks"
INPUT_URI = "s3://llm-logs/role"
RECORDS = 40
#: Lifetime of the role's credentials in the run where they expire: every set the run gets
#: expires before the run ends, and botocore (which refreshes a set that has less than ten
#: minutes left) refreshes them before each use.
SHORT_LIFETIME_S = 3


class RoleOnlyS3:
    """The proxy's rule: only a role key that has not expired yet (moto's record of its AssumeRole)."""

    def __init__(self, s3: LocalS3, role_arn: str) -> None:
        self.s3 = s3
        self.role_arn = role_arn

    def roles(self) -> dict[str, AssumedRole]:
        return {role.access_key_id: role for role in self.s3.assumed_roles() if role.role_arn == self.role_arn}

    def __call__(self, access_key: str) -> tuple[int, str, str] | None:
        role = self.roles().get(access_key)
        if role is None:
            return 403, "InvalidAccessKeyId", f"{access_key!r} is not a key of {self.role_arn}"
        if dt.datetime.now(dt.UTC) >= role.expiration:
            return 400, "ExpiredToken", "The provided token has expired."
        return None


@pytest.fixture
def role_connection(airflow_db: Any, local_s3: LocalS3, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., FaultyProxy]]:
    """``role_connection(lifetime_s)``: aws_default assumes the role (for ``lifetime_s`` seconds,
    or STS's default hour), its S3 requests go through the refusing proxy (returned); boto3's
    environment is gone for the test."""
    role_arn = local_s3.create_role(ROLE)
    rule = RoleOnlyS3(local_s3, role_arn)
    no_faults = S3FaultPlan(slow_down=0.0, server_error=0.0, reset=0.0)
    with FaultyProxy(local_s3.endpoint_url, no_faults, refuse=rule) as proxy:
        def use(lifetime_s: int | None = None) -> FaultyProxy:
            short: dict[str, Any] = {}
            if lifetime_s is not None:
                # AWS's shortest is 900 s, which botocore checks before sending: the connection's
                # botocore config turns that check off so the run can outlive its credentials.
                short = {"assume_role_kwargs": {"DurationSeconds": lifetime_s},
                         "config_kwargs": {"parameter_validation": False}}
            connection = local_s3.connection(role_arn=role_arn, endpoint_url=proxy.endpoint_url, **short)
            monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps(connection))
            for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
                monkeypatch.delenv(name, raising=False)
            return proxy

        yield use


def _by_polars(request: ProxiedRequest) -> bool:
    """A request of Polars' own S3 client (object_store), not of boto3."""
    return not request.user_agent.startswith(("Boto3", "Botocore", "aws-cli"))


def _run(local_s3: LocalS3, day: dt.date, output_uri: str) -> tuple[Any, pl.DataFrame]:
    conf = {"input_uri": INPUT_URI, "output_uri": output_uri, "judge_model": "offline/lexical", "chunk_size": 20}
    dag_run = airflow_local.run_dag("daily_evaluation", day, conf)
    assert str(dag_run.state) == "success", airflow_local.task_states(dag_run)
    out = storage.open_store(output_uri, local_s3.access())
    return dag_run, storage.scan_table(out, "runs").filter(pl.col("dt") == day).collect()  # type: ignore[union-attr]


def test_a_connection_with_role_arn_assumes_the_role_and_lands_the_day(local_s3: LocalS3,
                                                                       role_connection: Callable[..., FaultyProxy]) -> None:
    day = dt.date(2026, 8, 1)
    synthetic.write_day(storage.open_store(INPUT_URI, local_s3.access()), day, RECORDS, bad=False)
    before = {role.access_key_id for role in local_s3.assumed_roles()}
    proxy = role_connection()

    _, runs = _run(local_s3, day, "s3://llm-evaluation/role")

    assert runs.row(0, named=True)["status"] == "success" and runs.row(0, named=True)["valid_records"] == RECORDS
    role_arn = local_s3.create_role(ROLE)
    assumed = [role for role in local_s3.assumed_roles() if role.access_key_id not in before]
    assert assumed and {role.role_arn for role in assumed} == {role_arn}
    requests = proxy.requests
    # Every S3 request of the run (boto3's and Polars' reads of the landed tables for the report)
    # was signed with the role's keys, and none was refused.
    assert requests and not [r for r in requests if r.outcome == "refused"]
    assert {r.access_key for r in requests} <= {role.access_key_id for role in assumed}
    assert [r for r in requests if _by_polars(r)]  # the report's scans of the landed tables


def test_a_run_whose_credentials_expire_mid_run_still_lands(local_s3: LocalS3,
                                                            role_connection: Callable[..., FaultyProxy]) -> None:
    day = dt.date(2026, 8, 2)
    synthetic.write_day(storage.open_store(INPUT_URI, local_s3.access()), day, RECORDS, bad=False)
    before = {role.access_key_id for role in local_s3.assumed_roles()}
    proxy = role_connection(SHORT_LIFETIME_S)

    dag_run, runs = _run(local_s3, day, "s3://llm-evaluation/role-expiring")

    assert runs.row(0, named=True)["status"] == "success" and runs.row(0, named=True)["valid_records"] == RECORDS
    assumed = sorted((role for role in local_s3.assumed_roles() if role.access_key_id not in before),
                     key=lambda role: role.expiration)
    # The first credentials expired while the run went on, and were refreshed: the run's requests
    # were signed with many sets, each still current when it arrived (the proxy refuses others).
    assert assumed[0].expiration < dag_run.end_date
    used = {r.access_key for r in proxy.requests}
    assert not [r for r in proxy.requests if r.outcome == "refused"]
    assert used <= {role.access_key_id for role in assumed}
    assert len(used) > 2
    polars_reads = [r for r in proxy.requests if _by_polars(r)]
    assert polars_reads and {r.access_key for r in polars_reads} - {assumed[0].access_key_id}
