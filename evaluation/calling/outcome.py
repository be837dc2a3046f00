"""What one judge call produced (:class:`CallOutcome`), and the class of a failed call's error
(:data:`ERROR_CLASSES`; the client retries :data:`RETRYABLE`; ``auth`` is a key that is missing or
was refused, 401 or 403). A failed call is an outcome, never
an exception: the caller turns it into a ``call_error`` row with its error class.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import re
from dataclasses import dataclass
from typing import Any

RETRYABLE = frozenset({"rate_limit", "server_error", "timeout", "connection"})
ERROR_CLASSES = ("rate_limit", "server_error", "timeout", "connection", "auth", "bad_request", "quota", "other")


@dataclass
class CallOutcome:
    """What one judge call (all its attempts) produced."""

    raw_text: str | None
    error: str | None = None
    error_class: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    attempts: int = 0
    judged_at: dt.datetime | None = None

    @property
    def ok(self) -> bool:
        """True when the judge answered (whatever it answered)."""
        return self.error_class is None


def failed(error_class: str, error: str, latency_ms: float, attempts: int = 1) -> CallOutcome:
    """The outcome of a call that failed with ``error_class`` (``error``: its one-line message)."""
    return CallOutcome(raw_text=None, error=error, error_class=error_class, latency_ms=latency_ms,
                       attempts=attempts, judged_at=dt.datetime.now(dt.UTC))


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def classify_error(exc: BaseException) -> str:
    """The error class of an exception raised by a litellm call (its cause chain included: litellm
    reports a refused connection as a 500 whose cause is the connection error). litellm's
    exceptions subclass the OpenAI SDK's, which are tested here."""
    import httpx  # with openai: about 0.6 s, only once a call has failed
    import openai

    chain = _causes(exc)
    if any(isinstance(e, (TimeoutError, openai.APITimeoutError)) for e in chain):  # litellm.Timeout among them
        return "timeout"
    if any(isinstance(e, (openai.APIConnectionError, ConnectionError, httpx.ConnectError)) for e in chain[1:]):
        return "connection"
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)) or any(
            _NO_CREDENTIALS.search(str(e)) for e in chain):
        return "auth"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (by_status := status_error_class(status, str(exc))) is not None:
        return by_status
    if isinstance(exc, (ConnectionError, OSError)):
        return "connection"
    return "other"


def status_error_class(status: int, message: str = "") -> str | None:
    """The error class of an HTTP error status (``message``: the error's text, which tells a spent
    quota from a rate limit); None for a status that is no error."""
    if status == 429:
        return "quota" if _mentions_quota(message) else "rate_limit"
    if status == 408:
        return "timeout"
    if status in (401, 403):
        return "auth"
    if status >= 500:
        return "server_error"
    if 400 <= status < 500:
        return "bad_request"
    return None


#: How clients say that no key was given at all (the OpenAI SDK's "Missing credentials", which
#: litellm reports as a 500, and the providers' "api_key ... must be set" / "Missing ... API Key").
_NO_CREDENTIALS = re.compile(r"missing credentials|api_key client option must be set|missing [\w ]*api[ _]key",
                             re.IGNORECASE)


def _mentions_quota(message: str) -> bool:
    text = message.lower()
    return "insufficient_quota" in text or "exceeded your current quota" in text or "quota exceeded" in text


def _headers(exc: BaseException) -> Any:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return headers or getattr(exc, "litellm_response_headers", None) or None


def retry_after_seconds(exc: BaseException) -> float | None:
    """The server's ``Retry-After`` (seconds or an HTTP date; ``retry-after-ms`` first, as OpenAI
    sends it), when the error carries one it can read; None otherwise, so the call backs off as
    after a 429 without one."""
    headers = _headers(exc)
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(millis) / 1000.0)
    value = headers.get("retry-after") or headers.get("Retry-After")
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    try:  # an HTTP date; one without a zone, or anything else, states no wait
        return max(0.0, (email.utils.parsedate_to_datetime(value) - dt.datetime.now(dt.UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def rate_limit_headers(exc: BaseException, which: str = "limit") -> dict[str, float]:
    """The numbers an error's ``x-ratelimit-{which}-requests`` / ``-tokens`` headers state (OpenAI's,
    also sent by vLLM and many proxies): ``limit``, the provider's limits per minute, or
    ``remaining``, what is left of them."""
    headers: Any = _headers(exc) or {}
    numbers: dict[str, float] = {}
    for kind in ("requests", "tokens"):
        try:
            numbers[kind] = float(headers[f"x-ratelimit-{which}-{kind}"])
        except (KeyError, TypeError, ValueError):
            continue
    return numbers


def error_message(exc: BaseException, secret: str | None) -> str:
    """The exception's type and text on one line, at most 300 characters, ``secret`` masked."""
    message = " ".join(str(exc).split())
    # Mask before the cut (a key cut in two would no longer match). A placeholder key of a
    # keyless server ("EMPTY") is no secret, and masking it would garble the message.
    if secret and len(secret) >= 8:
        message = message.replace(secret, "***")
    return f"{type(exc).__name__}: {message[:300]}"
