"""Structured replies (a child of :mod:`bench.run`): the share of judge replies that do not parse
(``parse_error``) against a noisy server, with each judge's reply model sent as a JSON schema and
without (JSON mode only).

The server (:class:`evaluation.testing.openai_server.OpenAIServer`) answers every judge prompt as
the offline judge would (a correct reply in the judge's contract), except that a seeded share of
replies are noisy: ``malformed`` (prose, no JSON) or ``prose`` (the JSON wrapped in prose and a
code fence). Asked for a JSON schema, it answers as a provider that enforces one: schema-valid
JSON only. Every reply goes through the same extraction and parsing as in a run.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

from bench.common import child_main
from evaluation.calling import offline
from evaluation.calling.client import JudgeClient
from evaluation.contract.config import JUDGES, InputRecord, StructuredOutput
from evaluation.judges import RenderedPrompt, parse_reply, route
from evaluation.testing import synthetic
from evaluation.testing.openai_server import FaultPlan, OpenAIServer

#: A model name litellm knows to enforce JSON schemas (``auto`` sends one to it).
MODEL = "openai/gpt-4o-mini"


def _cases(records: int, seed: int) -> list[tuple[InputRecord, RenderedPrompt]]:
    cases = []
    for line in synthetic.generate_day(dt.date(2026, 3, 1), records, bad=False, seed=seed):
        data = json.loads(line)
        data.pop("metadata", None)
        record = InputRecord(**data)
        for judge in JUDGES:
            prompt = route(judge, record)
            if isinstance(prompt, RenderedPrompt):
                cases.append((record, prompt))
    return cases


def parse_error_rates(records: int = 100, *, malformed: float = 0.15, prose: float = 0.15,
                      seed: int = 3) -> dict[str, Any]:
    """Calls and parse-error counts per ``structured_output`` (``on``: schemas sent, ``off``: JSON
    mode) for every judge prompt of ``records`` generated records, against one noisy server."""
    cases = _cases(records, seed)
    faults = FaultPlan(rate_limit=0.0, server_error=0.0, hang=0.0, malformed=malformed, prose=prose, seed=seed)
    result: dict[str, Any] = {"records": records, "calls": len(cases), "malformed": malformed, "prose": prose}
    with OpenAIServer(lambda body: offline.respond(body.get("messages") or []), faults=faults,
                      models=("gpt-4o-mini",)) as server:
        modes: tuple[StructuredOutput, ...] = ("on", "off")
        for mode in modes:
            client = JudgeClient(MODEL, api_base=server.base_url, api_key="bench-key", concurrency=16,
                                 max_attempts=1, structured_output=mode)
            outcomes = asyncio.run(client.call_many([prompt for _, prompt in cases]))
            statuses = [parse_reply(prompt.judge, record, outcome.raw_text if outcome else None, prompt)["judge_status"]
                        for (record, prompt), outcome in zip(cases, outcomes, strict=True)]
            result[mode] = {"parse_errors": statuses.count("parse_error"),
                            "call_errors": sum(1 for o in outcomes if o is None or not o.ok)}
        result["faults_injected"] = server.fault_counts
    return result


def rates(params: dict[str, Any]) -> dict[str, Any]:
    """The child task of :mod:`bench.run`."""
    return parse_error_rates(int(params.get("records", 100)), seed=int(params.get("seed", 3)))


if __name__ == "__main__":
    child_main({"rates": rates})
