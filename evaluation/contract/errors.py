"""The project's errors: one family under :class:`EvaluationError`, whose message names the
object (a URI, a day, a judge) or the option at fault.

The command line maps :class:`UsageError` to exit 2 (a command line that cannot be used as given)
and every other error to exit 1 (a command that could not do its work). Each module's own error
subclasses one member below, keeping the builtin base its callers catch (``RuntimeError``,
``ValueError``).
"""

from __future__ import annotations

__all__ = ["ConfigurationError", "EvaluationError", "InputError", "JudgeError", "StorageError", "UsageError"]


class EvaluationError(Exception):
    """Any error of the project; its message names the object or option at fault."""


class UsageError(EvaluationError):
    """A command line or option value that cannot be used as given. A message of the form
    ``name: reason`` names the option by its field name (``input_format: ...``), which the command
    line shows as its flag."""


class InputError(EvaluationError):
    """Data that cannot be used as the contract says: raw logs, landed tables, a golden set."""


class StorageError(EvaluationError, RuntimeError):
    """A storage operation failed; the message names the URI."""


class JudgeError(EvaluationError):
    """The judge's provider is unreachable, or its answers cannot be used."""


class ConfigurationError(EvaluationError):
    """Settings that cannot work together or with what is installed or landed (a calibration a run
    names, a provider without a batch API, an unsupported library version)."""
