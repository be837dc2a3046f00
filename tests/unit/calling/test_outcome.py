"""classify_error reads a litellm error's class from its HTTP status: every rate-limit, server and
bad-request error litellm defines carries that status, as litellm itself builds them."""

from __future__ import annotations

import inspect

import litellm
import openai
import pytest

from evaluation.calling.outcome import classify_error

#: What each of the OpenAI SDK's classes means; litellm's errors subclass them.
EXPECTED = {openai.RateLimitError: "rate_limit", openai.InternalServerError: "server_error",
            openai.BadRequestError: "bad_request"}


def _litellm_errors() -> list[tuple[type[BaseException], str]]:
    found = []
    for cls in vars(litellm.exceptions).values():
        if inspect.isclass(cls) and issubclass(cls, tuple(EXPECTED)):
            found.append((cls, next(kind for base, kind in EXPECTED.items() if issubclass(cls, base))))
    return found


def test_every_litellm_rate_limit_server_and_bad_request_error_is_classed_by_its_status() -> None:
    built = []
    for cls, kind in _litellm_errors():
        try:
            exc = cls(message="refused", model="gpt-4o-mini", llm_provider="openai")  # type: ignore[call-arg]
        except TypeError:  # an error litellm builds with other arguments (a request's data, a store)
            continue
        assert isinstance(exc.status_code, int), cls  # type: ignore[attr-defined]
        assert classify_error(exc) == kind, cls
        built.append(cls.__name__)
    assert {"RateLimitError", "InternalServerError", "BadRequestError", "ContextWindowExceededError",
            "ContentPolicyViolationError"} <= set(built), built


@pytest.mark.parametrize("message", ["You exceeded your current quota, please check your plan",
                                     "insufficient_quota"])
def test_a_rate_limit_error_that_says_the_quota_is_spent_is_quota(message: str) -> None:
    exc = litellm.RateLimitError(message=message, model="gpt-4o-mini", llm_provider="openai")
    assert classify_error(exc) == "quota"
