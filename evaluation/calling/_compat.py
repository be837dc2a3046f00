"""Every use of a dependency's private API, in one module, each gated on the versions it was read from.

litellm's (read in 1.110): :func:`check_litellm`, called when the client sets litellm up, fails as
soon as another litellm is installed, rather than let a renamed private name drop a user's callbacks
without a word.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from packaging.version import Version

from evaluation.contract.errors import ConfigurationError

#: litellm versions the private names below were read from: at least the first, below the second.
LITELLM_SUPPORTED = ((1, 110), (1, 111))
#: litellm's callback lists: while all are empty, nothing reads what its success logging builds.
CALLBACK_LISTS = ("callbacks", "success_callback", "failure_callback", "_async_success_callback",
                  "_async_failure_callback", "input_callback", "service_callback")


_T = TypeVar("_T")


class UnsupportedVersion(ConfigurationError, RuntimeError):
    """An installed dependency is outside the versions whose private API this module uses."""


def check_litellm() -> str:
    """The installed litellm's version; raises :class:`UnsupportedVersion` outside :data:`LITELLM_SUPPORTED`."""
    found = importlib.metadata.version("litellm")
    low, high = LITELLM_SUPPORTED
    if not low <= Version(found).release < high:
        supported = f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"
        raise UnsupportedVersion(
            f"litellm {found} is installed, but evaluation/calling/_compat.py uses private parts of litellm read "
            f"from versions {supported} only (its internal-call flag, callback lists and response cost): "
            f"install litellm{supported}, or check those parts against {found} and widen LITELLM_SUPPORTED")
    return found


def internal_call_flag() -> ContextVar[bool]:
    """litellm's flag of its own nested calls: while set, litellm skips its success logging."""
    from litellm._internal_context import is_internal_call  # heavy: imported once the client sets litellm up

    return is_internal_call


def has_callbacks(litellm: Any) -> bool:
    """Whether any callback, of any kind, is registered with ``litellm``."""
    return any(getattr(litellm, name) for name in CALLBACK_LISTS)


def hidden_params(response: Any) -> Any:
    """What litellm attached to a response while building it (its cost, provider, model names)."""
    return getattr(response, "_hidden_params", None) or {}


def if_known(ask: Callable[..., _T], *args: Any, **kwargs: Any) -> _T | None:
    """``ask(*args, **kwargs)``, a litellm lookup of a model (its provider, its entry in the price
    map, the cost of a response of it), or None when litellm does not know the model."""
    # litellm: imported by the client's set-up before any lookup
    from litellm.exceptions import BadRequestError, ModelNotMappedError

    try:
        return ask(*args, **kwargs)
    except (BadRequestError, ModelNotMappedError):  # "LLM Provider NOT provided", "This model isn't mapped yet"
        return None
