"""The judge client's calling path against litellm's own, over HTTP to the embedded server.

* With no litellm callback registered, the client skips litellm's success logging (a tenth of a
  call's CPU): the request body and the outcome are the same as with logging on, and a callback
  registered later still sees every call.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import asyncio
from typing import Any

import pytest
from litellm.integrations.custom_logger import CustomLogger

from evaluation.calling import client as client_module
from evaluation.calling.client import JudgeClient
from evaluation.calling.outcome import CallOutcome
from evaluation.judges import RenderedPrompt
from evaluation.testing.openai_server import OpenAIServer, Reply, ScriptedResponder

pytestmark = pytest.mark.timeout(60)

OK = '{"score": 0.5, "hits": [], "misses": [], "reasoning": "fine"}'
PROMPT = RenderedPrompt(judge="prompt", prompt_version="prompt@test", system="You are a judge. Reply in JSON.",
                        user="Rate: the sky is blue. " * 20, key_fields=("score",))


def _essence(outcome: CallOutcome) -> tuple[Any, ...]:
    return (outcome.ok, outcome.raw_text, outcome.error_class, outcome.input_tokens, outcome.output_tokens,
            outcome.cost_usd, outcome.attempts)


class _Seen(CustomLogger):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.successes = 0

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self.successes += 1


@pytest.mark.parametrize("model", ["openai/mock-judge", "openai/gpt-4o-mini"])  # unpriced and priced
def test_skipping_litellms_logging_changes_neither_the_request_nor_the_outcome(model: str) -> None:
    seen = _Seen()
    with OpenAIServer(ScriptedResponder([OK, OK, Reply.bad_request(), Reply.bad_request()])) as server:
        client = JudgeClient(model, api_base=server.base_url, api_key="k", timeout_s=5, max_attempts=1)
        assert client_module._unlogged() is not None  # no callback: the quiet path
        quiet = asyncio.run(client.call(PROMPT))
        with client_module.callbacks_restored() as module:
            module.callbacks = [seen]
            assert client_module._unlogged() is None  # a callback: litellm logs as usual

            async def logged_calls() -> tuple[CallOutcome, CallOutcome]:
                outcomes = await client.call(PROMPT), await client.call(PROMPT)
                async with asyncio.timeout(60):  # litellm's logging worker runs on this loop: until it logs
                    while not seen.successes:
                        await asyncio.sleep(0.01)
                return outcomes

            logged, logged_error = asyncio.run(logged_calls())
        assert client_module._unlogged() is not None  # every list litellm copied it into is put back
        quiet_error = asyncio.run(client.call(PROMPT))
        first, second, *_ = server.requests
    assert first.body == second.body
    assert _essence(quiet) == _essence(logged) and quiet.ok
    if model == "openai/gpt-4o-mini":
        assert quiet.cost_usd > 0  # litellm's price, with or without its logging
    assert _essence(quiet_error) == _essence(logged_error) and quiet_error.error_class == "bad_request"
    assert seen.successes == 1  # the callback saw the logged call's success
