"""The one estimate of what judge calls will cost before they are made: the completion tokens a
reply is expected to take, per judge, and the price of tokens. The run's plan, ``python -m
evaluation plan`` (the sizing of a day and of a cascade's levels) and a batch's budget all count
with it, so they give the same figures for the same calls.

The prompt tokens are counted (litellm's token counter for the judge model); a reply's length is
the judge model's choice, so its tokens are an assumption: :data:`TYPICAL_REPLY_TOKENS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["DEFAULT_REPLY_TOKENS", "TYPICAL_REPLY_TOKENS", "mean_reply_tokens", "output_tokens", "reply_tokens",
           "tokens_cost"]

#: Typical completion tokens of one reply, per judge (the JSON each judge's prompt asks for).
TYPICAL_REPLY_TOKENS = {"rag": 220, "masis": 260, "prompt": 160}
#: Those of a judge the table does not name.
DEFAULT_REPLY_TOKENS = 200


def reply_tokens(judge: str) -> int:
    """Completion tokens one reply of ``judge`` is expected to take."""
    return TYPICAL_REPLY_TOKENS.get(judge, DEFAULT_REPLY_TOKENS)


def mean_reply_tokens(judges: Iterable[str]) -> float:
    """Expected completion tokens of a reply of any of ``judges`` (calls spread evenly over them)."""
    names = list(judges)
    return sum(map(reply_tokens, names)) / len(names) if names else float(DEFAULT_REPLY_TOKENS)


def output_tokens(calls: Mapping[str, int]) -> int:
    """Expected completion tokens of ``calls`` (judge -> calls)."""
    return sum(n * reply_tokens(judge) for judge, n in calls.items())


def tokens_cost(input_tokens: float, completion_tokens: float, prices: tuple[float, float]) -> float:
    """USD of ``input_tokens`` and ``completion_tokens`` at ``prices`` ((input, output) per token)."""
    return input_tokens * prices[0] + completion_tokens * prices[1]
