"""Structured replies: each judge's reply model goes out as a strict JSON schema where the provider
enforces one (litellm says so, or ``structured_output = on``), JSON mode otherwise, and the contract's
extraction reads every reply either way. Calls go through litellm to the test OpenAI server."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from bench.structured import parse_error_rates
from evaluation.calling.client import JudgeClient, call_parameters
from evaluation.contract.config import InputRecord, StructuredOutput
from evaluation.contract.judge_settings import JudgeSettings
from evaluation.judges import RenderedPrompt, render
from evaluation.judges.masis import MasisReply
from evaluation.judges.prompt import FreeformReply, RubricReply
from evaluation.judges.rag import RagReply
from evaluation.judges.schema import reply_format_of, strict_schema
from evaluation.testing.openai_server import OpenAIServer

RECORD = InputRecord(record_id="r1", timestamp=dt.datetime(2026, 3, 1, tzinfo=dt.UTC), model="m",
                     question="How tall is the Eiffel Tower?", answer="It is 330 metres tall [ctx-1].",
                     contexts=[{"id": "ctx-1", "text": "The Eiffel Tower is 330 metres tall."}],
                     rubrics=[{"id": "height", "description": "States 330 metres."}])


def _objects(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = [node] if "properties" in node else []
        return found + [o for value in node.values() for o in _objects(value)]
    if isinstance(node, list):
        return [o for value in node for o in _objects(value)]
    return []


@pytest.mark.parametrize("model", [RagReply, MasisReply, FreeformReply, RubricReply])
def test_every_reply_schema_is_strict(model: type) -> None:
    schema = strict_schema(model)
    objects = _objects(schema)
    assert objects and "$ref" not in str(schema) and "default" not in str(schema)
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    assert set(schema["properties"]) == set(model.model_fields)


def _sent(model: str, structured_output: StructuredOutput, prompt: RenderedPrompt) -> tuple[dict[str, Any], Any]:
    with OpenAIServer(models=(model.split("/", 1)[1],)) as server:
        client = JudgeClient(model, api_base=server.base_url, api_key="test-key", max_attempts=1,
                             structured_output=structured_output)
        outcome = asyncio.run(client.call(prompt))
        assert outcome.ok, outcome.error
        [request] = server.requests
    return client.call_parameters(), request.get("response_format")


@pytest.mark.parametrize(("model", "structured_output", "sends_schema"), [
    ("openai/gpt-4o-mini", "auto", True),    # litellm: the provider enforces schemas for this model
    ("openai/mock-judge", "auto", False),    # unknown to litellm: JSON mode, extraction reads the reply
    ("openai/mock-judge", "on", True),       # an OpenAI-compatible server said to enforce them
    ("openai/gpt-4o-mini", "off", False),
])
@pytest.mark.parametrize("judge", ["rag", "masis", "prompt"])
def test_a_provider_that_supports_schemas_is_sent_one(model: str, structured_output: StructuredOutput,
                                                      sends_schema: bool, judge: str) -> None:
    prompt = render(judge, RECORD)  # type: ignore[arg-type]
    assert prompt is not None and prompt.reply_model is not None
    parameters, sent = _sent(model, structured_output, prompt)
    if sends_schema:
        assert sent == {"type": "json_schema", "json_schema": {
            "name": prompt.reply_model.__name__, "schema": strict_schema(prompt.reply_model), "strict": True}}
        assert parameters["response_format"] == "json_schema"
        assert reply_format_of(prompt, parameters) == "json_schema"
    else:
        assert sent == {"type": "json_object"}
        assert "response_format" not in parameters  # the request hashes of JSON-mode runs stay as they were
        assert reply_format_of(prompt, parameters) == "json_object"
    settings = JudgeSettings(judge_model=model, api_base=parameters["api_base"], structured_output=structured_output)
    assert parameters == call_parameters(settings)


def test_the_offline_judge_is_never_sent_a_schema() -> None:
    assert "response_format" not in call_parameters(JudgeSettings(judge_model="offline/lexical", structured_output="on"))


def test_with_a_schema_the_noisy_server_gives_no_parse_error() -> None:
    """Same server, same prompts: 20% malformed and 20% prose-wrapped replies. Without a schema the
    malformed ones (and only those: extraction reads JSON inside prose) are parse errors; with one,
    none is."""
    result = parse_error_rates(40, malformed=0.2, prose=0.2, seed=11)
    injected = result["faults_injected"]
    assert injected["malformed"] > 0 and injected["prose"] > 0  # faults were drawn (for JSON-mode calls only)
    assert result["off"]["parse_errors"] == injected["malformed"]
    assert result["on"]["parse_errors"] == 0
    assert result["on"]["call_errors"] == result["off"]["call_errors"] == 0
