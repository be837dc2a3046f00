"""JSON extraction from a judge's raw reply (CONTRACT §2.1), and the value rules every judge's reply
model shares (numbers, free text, lists of strings).

The reply yields the **first JSON object that carries the judge's key field**: every ``{`` from
left to right is handed to a real JSON decoder, so strings holding braces or backticks, nested
objects, code fences and prose around the object all work. Nested objects count:
``{"result": {"score": 1}}`` yields the inner object for a key field ``score``, because its ``{``
is scanned like any other.

Injection defence: a candidate whose exact text also occurs in the record's own untrusted text
(question, answer, contexts, reference, expected outcome, rubric descriptions) is a quote of the
judged material, not the judge's verdict, and is skipped; the scan goes on to the next ``{``. So
when a judge quotes a fake verdict planted in an answer and then gives its own object, its own
object wins whether it comes before or after the quote.

Strict JSON: no single quotes, no trailing commas, no ``NaN``/``Infinity`` (a candidate holding one
is not valid JSON and is passed over).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import PlainValidator

from evaluation.contract.normalise import STRICT_JSON, is_number


def as_float(value: object) -> float:
    """A number (see :func:`is_number`) as a float."""
    if not is_number(value):
        raise ValueError(f"{value!r} is not a number")
    return float(value)  # type: ignore[arg-type]


def strings(value: object, limit: int | None = None) -> list[str]:
    """The string items of a list that are non-blank after strip, stripped, the first ``limit``;
    ``[]`` for anything that is not a list."""
    if not isinstance(value, list):
        return []
    return [item.strip() for item in value if isinstance(item, str) and item.strip()][:limit]


#: A reply value that must be a number (see :func:`is_number`); anything else fails validation.
Number = Annotated[float, PlainValidator(as_float)]
#: A reply's free text: the string, or None for any other value.
Text = Annotated[str | None, PlainValidator(lambda value: value if isinstance(value, str) else None)]
#: A reply's list of strings (see :func:`strings`); never fails validation.
Strings = Annotated[list[str], PlainValidator(strings)]


def extract_json_object(
    text: str | None,
    key_fields: Sequence[str],
    untrusted: Sequence[str] = (),
) -> dict[str, Any] | None:
    """The first JSON object in ``text`` with any of ``key_fields`` that is not a quote, or None."""
    if not text:
        return None
    position = text.find("{")
    while position != -1:
        try:
            obj, end = STRICT_JSON.raw_decode(text, position)
        except (ValueError, RecursionError):
            obj = None
        # a candidate quoted from the record's own text is no verdict: the scan goes on
        if isinstance(obj, dict) and any(key in obj for key in key_fields):
            if not any(text[position:end] in quoted for quoted in untrusted):
                return dict(obj)
        position = text.find("{", position + 1)
    return None
