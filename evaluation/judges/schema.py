"""Each judge's reply model as a strict JSON schema, for providers that enforce one (structured
output), and the ``response_format`` a judge call sends.

A provider that enforces the schema returns a reply that parses by construction; the contract's
extraction (CONTRACT §2.1, :mod:`evaluation.judges.extract`) still reads every reply, so a provider
that ignores the schema, or one asked for JSON mode only, is parsed as before. Strict schemas (the
form OpenAI's ``strict: true`` accepts): every object lists all its properties as required and
allows no others; an optional value is a nullable one; references are inlined.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from pydantic import BaseModel

from evaluation.judges.rendering import RenderedPrompt

#: How a judge call asks for its reply: a JSON schema, JSON mode, or neither (the prompt alone).
ReplyFormat = Literal["json_schema", "json_object"]


def _strict(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _strict(defs[ref.rsplit("/", 1)[-1]], defs)
    out = {key: value for key, value in node.items() if key not in ("default", "title", "$defs")}
    if "properties" in out:
        properties = {name: _strict(value, defs) for name, value in out["properties"].items()}
        out.update(type="object", properties=properties, required=list(properties), additionalProperties=False)
    if isinstance(out.get("items"), dict):
        out["items"] = _strict(out["items"], defs)
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [_strict(choice, defs) for choice in out["anyOf"]]
    return out


@cache
def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The strict JSON schema of a reply model (see the module docstring)."""
    schema = model.model_json_schema(mode="serialization")  # the plain validators hide the types
    return _strict(schema, schema.get("$defs", {}))


def reply_format(prompt: RenderedPrompt, *, json_mode: bool, response_schema: bool) -> ReplyFormat | None:
    """Which way a call of ``prompt`` asks for its reply: ``json_schema`` when the call parameters
    say the provider enforces schemas and the prompt has a reply model, else ``json_object`` when
    the provider takes JSON mode and the prompt wants JSON, else None (the prompt alone asks)."""
    if response_schema and prompt.reply_model is not None:
        return "json_schema"
    if json_mode and prompt.json_mode:
        return "json_object"
    return None


def response_format(prompt: RenderedPrompt, *, json_mode: bool, response_schema: bool) -> dict[str, Any] | None:
    """The ``response_format`` request parameter of a call of ``prompt`` (see :func:`reply_format`)."""
    kind = reply_format(prompt, json_mode=json_mode, response_schema=response_schema)
    if kind == "json_schema" and prompt.reply_model is not None:
        return {"type": "json_schema", "json_schema": {
            "name": prompt.reply_model.__name__, "schema": strict_schema(prompt.reply_model), "strict": True}}
    return {"type": "json_object"} if kind == "json_object" else None


def reply_format_of(prompt: RenderedPrompt, parameters: dict[str, Any]) -> ReplyFormat | None:
    """:func:`reply_format` from a run's call parameters (the ones in the ledger's request hash)."""
    return reply_format(prompt, json_mode=bool(parameters.get("json_mode")),
                        response_schema=parameters.get("response_format") == "json_schema")
