"""The private parts of dependencies in :mod:`evaluation.calling._compat`: they work on the installed
versions, and another version stops the client's set-up with a message that says why."""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest

from evaluation.calling import _compat, batch
from evaluation.calling import client as client_module
from evaluation.calling.client import JudgeClient
from evaluation.judges import RenderedPrompt
from evaluation.testing.openai_server import OpenAIServer

PROMPT = RenderedPrompt(judge="prompt", prompt_version="prompt@test", system="Reply in JSON.",
                        user="Rate: the sky is blue.", key_fields=("score",))


def test_the_installed_litellm_is_supported_and_its_private_parts_work() -> None:
    litellm = client_module.configure()
    assert _compat.check_litellm() == importlib.metadata.version("litellm")
    flag = _compat.internal_call_flag()
    assert flag.get() is False
    assert _compat.has_callbacks(litellm) is False
    litellm.success_callback.append(lambda *args: None)
    try:
        assert _compat.has_callbacks(litellm) is True
    finally:
        litellm.success_callback.pop()
    token = flag.set(True)  # as the client calls: litellm queues no logging of this call
    try:
        with OpenAIServer(lambda body: '{"score": 0.5}') as server:
            response = asyncio.run(litellm.acompletion(model="openai/gpt-4o-mini", messages=PROMPT.messages,
                                                       api_base=server.base_url, api_key="k", max_retries=0))
    finally:
        flag.reset(token)
    cost = _compat.hidden_params(response)["response_cost"]
    assert cost > 0 and cost == litellm.completion_cost(completion_response=response)


@pytest.mark.parametrize("found", ["1.109.9", "1.111.0", "2.0.0rc1"])
def test_another_litellm_fails_the_client_set_up_loudly(found: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: found if name == "litellm" else real(name))
    monkeypatch.setattr(client_module, "litellm", None)  # set up again, as a fresh process would
    with pytest.raises(_compat.UnsupportedVersion, match=rf"litellm {found} is installed.*>=1\.110,<1\.111"):
        JudgeClient("openai/mock-judge", api_base="http://127.0.0.1:9", api_key="k")


def test_a_model_litellm_does_not_know_reads_as_none_and_any_other_failure_propagates() -> None:
    litellm = client_module.configure()
    assert _compat.if_known(litellm.get_llm_provider, "no-such-model") is None  # no provider to place it
    assert _compat.if_known(litellm.get_model_info, "openai/no-such-model") is None  # not in the price map
    assert _compat.if_known(litellm.get_llm_provider, "openai/gpt-4o-mini")[1] == "openai"
    assert _compat.if_known(litellm.get_model_info, "openai/gpt-4o-mini")["input_cost_per_token"] > 0

    def broken(model: str) -> None:
        raise ValueError(f"a bug while looking {model} up")

    with pytest.raises(ValueError, match="a bug while looking x up"):
        _compat.if_known(broken, "x")


def test_the_client_and_batches_answer_for_a_model_litellm_does_not_know() -> None:
    assert client_module.supports_json_mode("no-such-model") is False
    assert client_module.supports_response_schema("no-such-model") is False
    assert client_module.price_per_token("openai/no-such-model") == (0.0, 0.0)
    assert client_module.endpoint("no-such-model", None) == "the default endpoint of no-such-model"
    assert client_module.credential_variables("no-such-model") == []
    assert batch.provider_of("no-such-model") == "unknown" and batch.provider_of("nowhere/model") == "nowhere"
    assert batch.batch_prices("openai/no-such-model") == (0.0, 0.0, False)


def test_a_reply_litellm_cannot_price_is_kept_at_zero_cost_and_the_failure_logged(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A pricing failure that is not an unknown model (a bug in litellm's cost code) must not lose
    a reply that was paid for: the call succeeds, counted at 0 USD, and the failure is logged."""
    litellm = client_module.configure()

    def broken(**_: object) -> float:
        raise RuntimeError("cost map entry is malformed")

    monkeypatch.setattr(litellm, "completion_cost", broken)
    with OpenAIServer(lambda body: '{"score": 0.5}') as server:
        # a model the price map does not know: litellm's own logging leaves no cost on the reply
        client = JudgeClient("openai/mock-judge-unpriced", api_base=server.base_url, api_key="k", max_attempts=1)
        outcome = asyncio.run(client.call(PROMPT))
    assert outcome.ok and outcome.raw_text == '{"score": 0.5}' and outcome.cost_usd == 0.0
    assert "could not price a reply" in caplog.text and "cost map entry is malformed" in caplog.text
