"""The private parts of dependencies in :mod:`evaluation.calling._compat`: they work on the installed
versions, and another version stops the client's set-up with a message that says why."""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest

from evaluation.calling import _compat
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
