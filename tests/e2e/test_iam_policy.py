"""The documented IAM policy (deploy/iam/policy.json) against every S3 request a deployment makes.

A day runs on the embedded S3 server behind a recording proxy on loopback, so boto3's requests and
Polars' reads in place alike are seen: airflow-init's storage check, the wait for the day, the
daily run (check, ingest, plan, judge, land, report), the same day landed again (which deletes
what it superseded), ``gc`` of the day's working data, and Airflow's own S3 task-log handler
writing and reading a task's log. Each request is mapped to what S3 authorizes it as
(:func:`tests.iam.authorizations`) and the policy evaluated on it with AWS's rules
(:func:`tests.iam.evaluate`): every one is allowed, each statement and action of the policy is
used by some request (or is one the docs justify without one), and requests a little outside the
policy are refused.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.contract.config import Retention
from evaluation.stages.wait import wait_for_day
from evaluation.storage import retention
from evaluation.testing import synthetic
from evaluation.testing.s3 import LocalS3
from scripts.check_storage import locations, wait_for_buckets
from tests.iam import Authorization, authorizations, evaluate, statement_matches, statements
from tests.reliability.faulty_proxy import FaultyProxy, ProxiedRequest, S3FaultPlan
from tests.reliability.helpers import DAY, config

ROOT = Path(__file__).resolve().parents[2]
POLICY = json.loads((ROOT / "deploy/iam/policy.json").read_text(encoding="utf-8"))
INPUT_URI, OUTPUT_URI = "s3://acme-llm-logs/raw", "s3://acme-llm-evaluation/curated"
TASK_LOGS = "s3://acme-airflow-logs/llm-evaluation"
#: Actions the policy grants that no recorded request needs, each with the docs' reason.
JUSTIFIED_UNUSED = {
    "s3:AbortMultipartUpload": "a failed multipart upload (an object above 8 MiB) is aborted, not left to bill",
}


def _bucket_of(uri: str) -> str:
    return uri.removeprefix("s3://").split("/", 1)[0]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ProxiedRequest]]:
    """Every request of a deployment's day, as the proxy saw it."""
    tmp_path = tmp_path_factory.mktemp("iam")
    with LocalS3() as s3:
        for uri in (INPUT_URI, OUTPUT_URI, TASK_LOGS):
            s3.create_bucket(_bucket_of(uri))
        # the day's logs, as the application writing them puts them (not the pipeline's requests)
        synthetic.write_day(storage.open_store(INPUT_URI, s3.access()), DAY, 40)
        storage.open_store(INPUT_URI, s3.access()).write_bytes(storage.raw_prefix(DAY) + "_SUCCESS", b"")
        plan = S3FaultPlan(slow_down=0, server_error=0, reset=0)
        with FaultyProxy(s3.endpoint_url, plan) as proxy:
            _a_deployments_day(s3, proxy.endpoint_url, tmp_path)
            yield proxy.requests


def _a_deployments_day(s3: LocalS3, endpoint_url: str, tmp_path: Path) -> None:
    access = storage.s3_access(s3.session(), endpoint_url=endpoint_url)
    wait_for_buckets(access.client, locations([INPUT_URI, OUTPUT_URI]), connection_id="aws_default", timeout_s=0)
    for run_id in ("scheduled__2026-11-21", "manual__again"):
        cfg = config(tmp_path / run_id, run_id=run_id, input_uri=INPUT_URI, output_uri=OUTPUT_URI,
                     judge_model="offline/lexical", chunk_size=20, max_reject_ratio=0.5, completion_marker="_SUCCESS")
        stores = stages.Stores.open(cfg, access)
        waited = wait_for_day(cfg, stores)
        run_day(cfg, stores, waited_s=waited)
    out = storage.open_store(OUTPUT_URI, access)
    gc = retention.collect(out, Retention(), now=dt.datetime.now(dt.UTC) + dt.timedelta(days=400))
    assert gc.objects, "gc found nothing to delete: it made no delete requests"
    retention.apply(out, gc)
    _task_log(s3, endpoint_url, tmp_path)


def _task_log(s3: LocalS3, endpoint_url: str, tmp_path: Path) -> None:
    """A task's log written twice (the second appends) and read back, by the Amazon provider's
    own remote-log IO, through the connection it reads (``remote_log_conn_id``)."""
    from airflow.providers.amazon.aws.log.s3_task_handler import S3RemoteLogIO

    folder = tmp_path / "logs"
    log = folder / "dag_id=daily_evaluation/run_id=r1/task_id=land/attempt=1.log"
    log.parent.mkdir(parents=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps(s3.connection(endpoint_url=endpoint_url)))
        patch.setenv("AIRFLOW__LOGGING__REMOTE_LOG_CONN_ID", "aws_default")
        io = S3RemoteLogIO(remote_base=TASK_LOGS, base_log_folder=folder, delete_local_copy=False)
        for line in ("started\n", "landed\n"):
            log.write_text(line)
            io.upload(log)
        _, messages = io.read(str(log.relative_to(folder)), None)
    assert messages is not None and "started\nlanded\n" in "".join(messages)


def _needs(request: ProxiedRequest) -> list[Authorization]:
    """What AWS checks for ``request``: its own authorizations and, for a read of an object that
    is not there, s3:ListBucket on the bucket with no prefix, without which S3 answers 403, not
    the 404 the client was answered here."""
    found = authorizations(request.method, request.path, dict(request.headers), request.body)
    if request.method in ("GET", "HEAD") and request.outcome == "404" and found[0].action == "s3:GetObject":
        bucket = found[0].resource.split(":::", 1)[1].split("/", 1)[0]
        found.append(Authorization("s3:ListBucket", f"arn:aws:s3:::{bucket}"))
    return found


def test_every_request_of_the_day_is_allowed(recorded: list[ProxiedRequest]) -> None:
    assert all(r.outcome.startswith(("2", "3", "404")) for r in recorded), [r for r in recorded if r.outcome >= "400"]
    refused = [f"{r.method} {r.path}: {a}" for r in recorded for a in _needs(r) if evaluate(POLICY, a) != "allow"]
    assert not refused, refused


def test_the_day_was_recorded_whole(recorded: list[ProxiedRequest]) -> None:
    agents = {("boto" if r.user_agent.startswith(("Boto3", "Botocore")) else "polars") for r in recorded}
    assert agents == {"polars", "boto"}, "Polars' reads in place went past the proxy"
    kinds = {(a.action, "s3:prefix" in a.context) for r in recorded for a in _needs(r)}
    assert {("s3:ListBucket", True), ("s3:GetObject", False), ("s3:PutObject", False),
            ("s3:DeleteObject", False)} <= kinds
    # copies, multi-object deletes and the commit record's conditional PUTs are among them
    assert any("x-amz-copy-source" in dict(r.headers) for r in recorded)
    assert any(r.method == "POST" and "delete" in r.path for r in recorded)
    conditional = [r for r in recorded if r.method == "PUT" and "/_landed/" in r.path]
    assert {bool(r.header("if-none-match")) for r in conditional} == {True, False}  # first landing, then over it
    assert all(r.header("if-none-match") == "*" or r.header("if-match") for r in conditional)


def test_no_request_of_the_pipeline_needs_to_list_a_whole_bucket(recorded: list[ProxiedRequest]) -> None:
    pipeline = {f"arn:aws:s3:::{_bucket_of(uri)}" for uri in (INPUT_URI, OUTPUT_URI)}
    whole = [f"{r.method} {r.path}" for r in recorded for a in _needs(r)
             if a.action == "s3:ListBucket" and a.resource in pipeline and "s3:prefix" not in a.context]
    assert not whole, whole


def test_every_grant_of_the_policy_is_used_or_justified(recorded: list[ProxiedRequest]) -> None:
    needed = [a for r in recorded for a in _needs(r)]
    for statement in statements(POLICY):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        for action in actions:
            used = [a for a in needed if a.action == action and statement_matches(statement, a)]
            assert used or action in JUSTIFIED_UNUSED, f"{statement['Sid']} grants {action}, which no request needs"
    docs = (ROOT / "docs/deploy.md").read_text(encoding="utf-8")
    for action in JUSTIFIED_UNUSED:
        assert action in docs


@pytest.mark.parametrize("request_", [
    Authorization("s3:ListBucket", "arn:aws:s3:::acme-llm-evaluation"),  # the bucket's root, no prefix
    Authorization("s3:ListBucket", "arn:aws:s3:::acme-llm-evaluation", {"s3:prefix": ""}),
    Authorization("s3:ListBucket", "arn:aws:s3:::acme-llm-evaluation", {"s3:prefix": "other/"}),
    Authorization("s3:ListBucket", "arn:aws:s3:::acme-llm-logs", {"s3:prefix": "curated/"}),  # the other bucket's
    Authorization("s3:GetObject", "arn:aws:s3:::acme-llm-evaluation/other/x.parquet"),
    Authorization("s3:GetObject", "arn:aws:s3:::acme-llm-evaluation/curatedx/y"),
    Authorization("s3:PutObject", "arn:aws:s3:::acme-llm-logs/raw/dt=2026-11-20/part.jsonl"),  # logs are read-only
    Authorization("s3:DeleteObject", "arn:aws:s3:::acme-llm-logs/raw/dt=2026-11-20/part.jsonl"),
    Authorization("s3:DeleteObject", "arn:aws:s3:::acme-airflow-logs/llm-evaluation/x.log"),
    Authorization("s3:DeleteBucket", "arn:aws:s3:::acme-llm-evaluation"),
    Authorization("s3:ListAllMyBuckets", "*"),
])
def test_requests_outside_the_policy_are_refused(request_: Authorization) -> None:
    assert evaluate(POLICY, request_) == "implicit_deny"


def test_the_docs_show_the_policy_file() -> None:
    docs = (ROOT / "docs/deploy.md").read_text(encoding="utf-8")
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", docs, re.DOTALL)]
    assert POLICY in blocks, "docs/deploy.md does not show deploy/iam/policy.json as it is"


def test_a_refusal_names_the_permission_and_the_key(tmp_path: Any) -> None:
    """What a role without the grant sees: the action and the object, from every kind of read."""
    with LocalS3() as s3:
        s3.create_bucket("acme-llm-evaluation")
        storage.open_store(OUTPUT_URI, s3.access()).write_bytes("_landed/dt=2026-11-20.json", b"{}")
        refuse = FaultyProxy(s3.endpoint_url, S3FaultPlan(slow_down=0, server_error=0, reset=0),
                             refuse=lambda _key: (403, "AccessDenied", "Access Denied"))
        with refuse as proxy:
            store = storage.open_store(OUTPUT_URI, storage.s3_access(s3.session(), endpoint_url=proxy.endpoint_url))
            key = "_landed/dt=2026-11-20.json"
            checks = {
                "s3:ListBucket on arn:aws:s3:::acme-llm-evaluation with s3:prefix 'curated/_landed/dt=2026-11-20.json'":
                    lambda: store.exists(key),
                "s3:GetObject on arn:aws:s3:::acme-llm-evaluation/curated/_landed/dt=2026-11-20.json":
                    lambda: store.read_bytes(key),
                "s3:ListBucket on arn:aws:s3:::acme-llm-evaluation with s3:prefix 'curated/_landed/'":
                    lambda: store.list("_landed/"),
            }
            for permission, read in checks.items():
                with pytest.raises(storage.StorageError, match="access denied") as raised:
                    read()
                assert permission in str(raised.value)
            with pytest.raises(storage.StorageError, match="access denied") as raised:
                store.download_file(key, Path(tmp_path) / "x")
            assert "s3:GetObject on arn:aws:s3:::acme-llm-evaluation/curated/_landed" in str(raised.value)
            with pytest.raises(storage.StorageError, match="access denied") as raised:  # Polars' reader
                storage.scan_parquet(store, ["evaluations/dt=2026-11-20/run-r1.parquet"])
            assert "s3:GetObject on arn:aws:s3:::acme-llm-evaluation/curated/evaluations/dt=2026-11-20/run-r1.parquet" \
                in str(raised.value)
