"""Privacy: PII is redacted before it reaches the judge, and no secret ever leaves the process.

Redaction is table-driven over :func:`evaluation.contract.redact.redact_text`, then end to end: with
``redact_pii`` the judge server receives no planted PII. The secret test plants an API key and
S3-style credentials, has the judge server echo the key back in error bodies (as some gateways do),
runs ``python -m evaluation run -v`` in a subprocess and searches everything it produced.
"""

from __future__ import annotations

import contextvars
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from aiohttp import web

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.contract.redact import redact_text
from evaluation.testing import synthetic
from evaluation.testing.openai_server import FaultPlan, OpenAIServer, Reply
from tests.reliability.helpers import DAY, PYTHON, REPO, cli_env, config, judge_reply, table

REDACTED = [
    ("write to jane.doe+billing@example.co.uk today", "write to <EMAIL> today", 1),
    ("call +1 415-555-0132 or (020) 7946 0958", "call <PHONE> or <PHONE>", 2),
    ("office: (415) 555-0132, Berlin +49 30 901820, Paris +33 1 42 68 53 00", "office: <PHONE>, Berlin <PHONE>, Paris <PHONE>", 3),
    ("card 4111 1111 1111 1111 and 5500-0000-0000-0004", "card <CARD> and <CARD>", 2),
    ("amex 378282246310005.", "amex <CARD>.", 1),
    ("IBAN GB82 WEST 1234 5698 7654 32 or DE89370400440532013000", "IBAN <IBAN> or <IBAN>", 2),
    ("from 192.168.1.20 and 10.0.0.1", "from <IP> and <IP>", 2),
    ("v6 2001:0db8:85a3:0000:0000:8a2e:0370:7334 and 2001:db8::1 and fe80::1ff:fe23:4567:890a",
     "v6 <IP> and <IP> and <IP>", 3),
]
LEFT_ALONE = [
    "order 4111 1111 1111 1112 shipped",  # fails Luhn
    "order 1234-5678-9012-3456 shipped",
    "order ORD-4111111111111112",
    "ticket 20261120000123",
    "IBAN-like GB00WEST12345698765432",  # fails mod 97
    "released on 2026-11-20 at 10:30:45, or 20.11.2026",
    "version 1.2.3, slice x[::2], 10.0.0.256",
    "the context [ctx-1] says 1,234,567.89",
]


@pytest.mark.parametrize(("text", "redacted", "count"), REDACTED)
def test_pii_is_replaced_and_counted(text: str, redacted: str, count: int) -> None:
    assert redact_text(text) == (redacted, count)


@pytest.mark.parametrize("text", LEFT_ALONE)
def test_ids_dates_and_numbers_that_are_not_pii_are_left_alone(text: str) -> None:
    assert redact_text(text) == (text, 0)


PII = ["jane.doe@example.com", "+1 415-555-0132", "4111 1111 1111 1111", "GB82 WEST 1234 5698 7654 32",
       "203.0.113.77", "2001:db8::1"]


def test_with_redact_pii_the_judge_never_sees_the_planted_pii(tmp_path: Path) -> None:
    rubrics = [{"id": "states-value", "description": "Mentions jane.doe@example.com"}]
    lines = []
    for i in range(6):
        lines.append(json.dumps({
            "record_id": f"pii-{i}", "timestamp": f"{DAY}T08:00:00Z", "model": "assistant-v1",
            "question": f"I am jane.doe@example.com, phone +1 415-555-0132. Why was card 4111 1111 1111 1111 charged? ({i})",
            "answer": "Your IBAN GB82 WEST 1234 5698 7654 32 was used from 203.0.113.77 [ctx-1].",
            "contexts": [{"id": "ctx-1", "text": "Login from 2001:db8::1 by jane.doe@example.com; order 4111 1111 1111 1112."}],
            "reference": "Refund to GB82 WEST 1234 5698 7654 32.",
            **({"rubrics": rubrics} if i % 2 else {"expected_outcome": "Mail jane.doe@example.com"}),
        }))
    storage.LocalStore(tmp_path / "raw").write_bytes(f"dt={DAY}/pii.jsonl", ("\n".join(lines) + "\n").encode())
    with OpenAIServer(responder=judge_reply) as server:
        cfg = config(tmp_path, judge_model="openai/mock-judge", api_base=server.base_url, redact_pii=True)
        result = run_day(cfg, stages.Stores.open(cfg), api_key="k")
        sent = [json.dumps(r.body, ensure_ascii=False) for r in server.requests]
    assert result["statuses"]["ok"] == result["rows"] == 18
    assert len(sent) >= 3
    for body in sent:
        for pii in PII:
            assert pii not in body
        assert "order 4111 1111 1111 1112" in body or "judge: prompt" in body  # ids stay for the judge
        assert "<EMAIL>" in body
    calls = table(tmp_path / "out", "judge_calls")
    assert calls["redactions"].min() >= 9
    for column in ("system_prompt", "user_prompt"):
        for pii in PII:
            assert not calls[column].str.contains(pii, literal=True).any()
    # The audit columns come from the judged (redacted) text; the record ids and citations stay.
    evaluations = table(tmp_path / "out", "evaluations")
    masis = evaluations.filter(pl.col("judge") == "masis")
    assert masis["citations"].to_list() == [["ctx-1"]] * 6


# ---------------------------------------------------------------------------------------------
# Secrets


_AUTHORIZATION: contextvars.ContextVar[str] = contextvars.ContextVar("authorization", default="")


class EchoingServer(OpenAIServer):
    """An OpenAI-compatible server that records the Authorization header and lets replies echo it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.authorizations: list[str] = []

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        self.authorizations.append(header)
        _AUTHORIZATION.set(header)
        return await super()._handle_chat(request)


def _echoing_judge(body: dict[str, Any]) -> Reply | str:
    """Echo the caller's Authorization header in error bodies, at offsets that straddle any cut-off."""
    digest = FaultPlan.body_key(body)
    pad = "x" * (100 + int(digest[:4], 16) % 100)
    echoed = f"{pad} upstream rejected Authorization: {_AUTHORIZATION.get()} (request {digest[:8]})"
    bucket = int(digest[4:8], 16) % 10
    if bucket == 0:  # a 401 that is never retried: lands as a call_error row with its message
        return Reply.error(401, f"Incorrect API key provided: {echoed}", "invalid_request_error", "invalid_api_key")
    return judge_reply(body)


def test_a_planted_api_key_and_s3_secret_appear_in_no_output(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    api_key = f"sk-test-PLANTED-{token}"
    s3_secret = f"S3PLANTEDSECRET{token}"
    s3_key_id = f"AKIAPLANTED{token[:8].upper()}"
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 30, bad=False)
    out = tmp_path / "out"
    # First attempts fail with a 500 that echoes the key too: retried, they leave only logs behind.
    faults = FaultPlan(rate_limit=0.0, server_error=0.3, hang=0.0, malformed=0.0, seed=3, max_faults_per_body=1)
    with EchoingServer(responder=_echoing_judge, faults=faults) as server:
        env = cli_env(EVALUATION_JUDGE_API_KEY=api_key, AWS_ACCESS_KEY_ID=s3_key_id, AWS_SECRET_ACCESS_KEY=s3_secret,
                      AWS_SESSION_TOKEN=s3_secret, LITELLM_LOG="DEBUG")
        process = subprocess.run(
            [PYTHON, "-m", "evaluation", "-v", "run", "--date", DAY.isoformat(), "--input", str(tmp_path / "raw"),
             "--output", str(out), "--judge-model", "openai/mock-judge", "--api-base", server.base_url,
             "--concurrency", "8", "--timeout-s", "2", "--max-call-error-ratio", "0.5", "--run-id", "secret-run"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
        )
        authorizations = set(server.authorizations)
    assert process.returncode == 0, process.stderr[-3000:]
    assert authorizations == {f"Bearer {api_key}"}, "the planted key must be the one the judge received"
    summary = json.loads(process.stdout)
    assert summary["status"] == "success" and summary["statuses"]["call_error"] > 0

    outputs = {"stdout": process.stdout, "stderr": process.stderr}
    for path in out.rglob("*"):
        if path.is_file():
            outputs[str(path)] = path.read_bytes().decode("utf-8", "ignore")
            if path.suffix == ".parquet":
                outputs[f"{path} (rows)"] = pl.read_parquet(path).write_ndjson()
    assert any("judge_calls" in name for name in outputs) and "INFO" in process.stderr
    # Any eight characters in a row of a secret count: a key cut short still leaks its head.
    pieces = {secret[i:i + 8] for secret in (api_key, s3_secret, s3_key_id) for i in range(len(secret) - 7)}
    for name, text in outputs.items():
        leaked = sorted(piece for piece in pieces if piece in text)
        assert not leaked, f"{leaked[:3]} leaked into {name}"

    # The echoed errors did reach the landed rows, masked.
    errors = table(out, "judge_calls").filter(pl.col("error").is_not_null())["error"]
    assert errors.len() == summary["statuses"]["call_error"] > 0
    assert errors.str.starts_with("auth (not retried)").all()  # a refused key (401)
    assert errors.str.contains("Authorization: Bearer ***", literal=True).any()
