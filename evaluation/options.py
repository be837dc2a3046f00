"""The run options, defined once: the CLI's flags and the DAG's Params form are both built from
:data:`OPTIONS`, and :func:`build_config` turns their values into a :class:`RunConfig`.

This module is light on purpose (pydantic only): the DAG file imports it at parse time. Nothing
here reads the environment then: an option with an ``env`` variable has an empty default, and
:func:`build_config` fills an empty value from that variable when the run is configured (in the
task, or the CLI), so a worker's environment applies, not the parsing process's.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from evaluation.adapters import INPUT_FORMATS, check_input_format, parse_mapping
from evaluation.contract import JUDGES, OFFLINE_JUDGE_MODEL, STRUCTURED_OUTPUT, RunConfig, Thresholds


@dataclass(frozen=True)
class Option:
    """One run option: its name (a Param name, and ``--name-with-dashes`` on the CLI)."""

    name: str
    kind: str  # string, integer, number, boolean, judges
    default: Any
    title: str
    help: str
    minimum: float | None = None
    maximum: float | None = None
    nullable: bool = False
    env: str | None = None  #: the variable an empty value is taken from when the run is configured
    fallback: Any = None  #: the value when the option and its variable are both empty
    choices: tuple[str, ...] | None = None  #: the accepted values, when they are a fixed set

    @property
    def flag(self) -> str:
        """The CLI flag."""
        return "--" + self.name.replace("_", "-")


OPTIONS: tuple[Option, ...] = (
    Option("input_uri", "string", "", "Input URI",
           "Root of the raw logs: s3://bucket/prefix or a directory; the day is read from dt=YYYY-MM-DD/. "
           "Empty: $EVALUATION_INPUT_URI.", env="EVALUATION_INPUT_URI"),
    Option("output_uri", "string", "", "Output URI",
           "Root of the landed tables: s3://bucket/prefix or a directory. Empty: $EVALUATION_OUTPUT_URI.",
           env="EVALUATION_OUTPUT_URI"),
    Option("input_format", "string", "own", "Input format",
           "Shape of the raw records: own (the contract's fields) or openai-chat (a messages list in the OpenAI "
           "chat format). See docs/inputs.md.", choices=INPUT_FORMATS),
    Option("input_mapping", "string", "", "Input mapping",
           "Fields read from other places of a record, on top of the input format: field=path pairs separated "
           "by commas, e.g. question=request.messages[-1].content,answer=response.text. Empty: none."),
    Option("judges", "judges", list(JUDGES), "Judges", "Judges to run: rag, masis, prompt."),
    Option("judge_model", "string", "", "Judge model",
           "Any litellm model string (openai/gpt-4o-mini, anthropic/..., bedrock/..., ollama/...); "
           "offline/lexical is the built-in lexical baseline (no network, no key). "
           f"Empty: $EVALUATION_JUDGE_MODEL, else {OFFLINE_JUDGE_MODEL}.",
           env="EVALUATION_JUDGE_MODEL", fallback=OFFLINE_JUDGE_MODEL),
    Option("api_base", "string", "", "API base",
           "Base URL of an OpenAI-compatible server (vLLM, Ollama, a proxy); empty for $EVALUATION_API_BASE, "
           "else the provider's own.", env="EVALUATION_API_BASE"),
    Option("structured_output", "string", "auto", "Structured output",
           "Send each judge's reply model as a JSON schema (the reply then parses by construction; extraction "
           "stays the fallback): auto where litellm says the provider and model enforce one, on for an "
           "OpenAI-compatible server that does, off for JSON mode only. Batch lines too; changes the ledger's "
           "request hashes.", choices=STRUCTURED_OUTPUT),
    Option("chunk_size", "integer", 500, "Chunk size", "Records per judge chunk (one mapped task each).", 1),
    Option("concurrency", "integer", 8, "Concurrency", "Judge calls in flight per chunk.", 1, 1024),
    Option("timeout_s", "number", 60.0, "Call timeout (s)", "Timeout of one HTTP attempt.", 1),
    Option("max_attempts", "integer", 4, "Max attempts", "Attempts per judge call, the first included.", 1, 20),
    Option("retry_budget_s", "number", 120.0, "Retry budget (s)", "Cap on the time spent on one call.", 1),
    Option("probe_timeout_s", "number", 30.0, "Probe timeout (s)",
           "How long the probe call sent before the run starts may take, retries of a busy endpoint included; "
           "missing or refused credentials and a refused connection end it at once.", 0.1),
    Option("pass_threshold", "number", 0.8, "Pass threshold", "score >= this is pass.", 0, 1),
    Option("borderline_threshold", "number", 0.6, "Borderline threshold", "score >= this is borderline.", 0, 1),
    Option("thresholds_from", "string", "", "Thresholds from a calibration",
           "Empty, or <calibration id>/<judge>, comma-separated for several judges (cal-1/rag,cal-2/masis): that "
           "judge's verdicts use the thresholds the calibration fitted for it (its score row); every other judge "
           "keeps the two above. The runs row records each judge's thresholds and source."),
    Option("max_reject_ratio", "number", 0.05, "Max reject ratio",
           "Fail the run (after landing rejects) when more input records than this share are rejected.", 0, 1),
    Option("max_record_chars", "integer", 200_000, "Max record chars", "Reject records whose texts exceed this.", 1),
    Option("allow_empty", "boolean", False, "Allow empty day", "Succeed when the day has no input objects."),
    Option("completion_marker", "string", "", "Completion marker",
           "Name of the object (e.g. _SUCCESS) under the day's prefix that says the day's export is complete: "
           "the DAG waits for it before ingesting. Empty: wait for the quiet period instead."),
    Option("quiet_period_s", "number", None, "Quiet period (s)",
           "Without a completion marker, the day is complete once no object has been added under its prefix "
           "for this long (0: do not wait). Empty: $EVALUATION_QUIET_PERIOD_S, else 300.", 0,
           nullable=True, env="EVALUATION_QUIET_PERIOD_S", fallback=300.0),
    Option("wait_deadline_s", "number", 21600.0, "Wait deadline (s)",
           "How long the DAG waits for the day to be complete (marker or quiet period) before the run fails.", 1),
    Option("max_call_error_ratio", "number", 0.2, "Max call-error ratio",
           "Fail the run (after landing) when more judge calls than this share end in call_error.", 0, 1),
    Option("sample", "string", "", "Sample",
           "Empty for every record; a fraction (0.25) or a count per model (200), stratified by model."),
    Option("budget_usd", "number", None, "Budget (USD)", "Stop new judge calls once this much is spent.", 0,
           nullable=True),
    Option("judge_rpm", "number", None, "Judge requests/min",
           "The provider's requests per minute for the whole deployment, shared by every judge task (through "
           "Redis, else divided by the llm_judge pool's slots). Empty: the llm_judge connection's extra rpm, else none.",
           0, nullable=True),
    Option("judge_tpm", "number", None, "Judge tokens/min",
           "The provider's tokens per minute (prompt and completion) for the whole deployment, shared like judge_rpm, "
           "estimated before each call and corrected with the usage returned. Empty: the llm_judge connection's "
           "extra tpm, else none.",
           0, nullable=True),
    Option("redact_pii", "boolean", False, "Redact PII",
           "Redact emails, phone numbers, cards, IBANs and IPs before text reaches the judge."),
    Option("rejudge_parse_errors", "boolean", False, "Re-judge parse errors",
           "Call the judge again where the stored reply does not parse (parse_error), e.g. after a "
           "provider glitch; the new reply replaces the old one in the ledger. Off: stored replies "
           "are reused as they are, never paid for twice."),
    Option("batch", "boolean", False, "Batch mode",
           "Send each chunk's judge calls as provider batches (OpenAI or Azure batch API: batch prices, "
           "results within 24 h); the judge task waits deferred, holding no worker slot."),
    Option("batch_deadline_h", "number", 48.0, "Batch deadline (h)",
           "Hours after a chunk's first batch within which an expired or cancelled batch's missing requests, "
           "and lines that failed for a transient reason (5xx, 429, timeout; up to max_attempts runs), are "
           "submitted again; past it they end as call_error.", 0.001),
    Option("batch_poll_s", "number", 60.0, "Batch poll interval (s)", "Seconds between two looks at a batch.", 0.01),
    Option("batch_max_requests", "integer", None, "Batch max requests",
           "Requests per provider batch: a chunk's batch is split into parts of at most this many. "
           "Empty or 0: the provider's limit (OpenAI and Azure 50,000).", 0, nullable=True),
    Option("batch_max_bytes", "integer", None, "Batch max bytes",
           "Bytes of a provider batch's input file: a chunk's batch is split into parts of at most this size. "
           "Empty or 0: the provider's limit (OpenAI and Azure 200 MB).", 0, nullable=True),
    Option("dry_run", "boolean", False, "Dry run",
           "Stop after planning: read and validate the day and estimate its calls, tokens, cost and time "
           "(in the plan task's log and result); no judge call, nothing landed."),
)

OPTION_NAMES = tuple(o.name for o in OPTIONS)


def build_config(values: dict[str, Any], *, date: dt.date, run_id: str, trigger: str) -> RunConfig:
    """A validated RunConfig from option values (unknown names are refused)."""
    unknown = set(values) - set(OPTION_NAMES)
    if unknown:
        raise ValueError(f"unknown options: {', '.join(sorted(unknown))}")
    merged = {o.name: o.default for o in OPTIONS}
    merged.update({k: v for k, v in values.items() if v is not None})
    for option in OPTIONS:
        if option.env is not None and merged[option.name] in (None, ""):  # 0 and False are values
            merged[option.name] = os.environ.get(option.env) or option.fallback or option.default
    # Checked here too, so that a bad format or mapping reads as its own one line.
    check_input_format(merged["input_format"])
    parse_mapping(merged["input_mapping"])
    if not merged["input_uri"] or not merged["output_uri"]:
        raise ValueError("input_uri and output_uri are required (set them, or EVALUATION_INPUT_URI/_OUTPUT_URI)")
    thresholds = Thresholds.model_validate(
        {"pass": merged.pop("pass_threshold"), "borderline": merged.pop("borderline_threshold")}
    )
    return RunConfig(date=date, run_id=run_id, trigger=trigger, thresholds=thresholds, **merged)


def param_schema(option: Option) -> dict[str, Any]:
    """JSON Schema of one option, for an Airflow Param."""
    if option.kind == "judges":
        return {
            "type": "array",
            "items": {"type": "string", "enum": list(JUDGES)},
            "minItems": 1,
            "uniqueItems": True,
        }
    schema: dict[str, Any] = {"type": [option.kind, "null"] if option.nullable else option.kind}
    if option.choices is not None:
        schema["enum"] = list(option.choices)
    if option.minimum is not None:
        schema["minimum"] = option.minimum
    if option.maximum is not None:
        schema["maximum"] = option.maximum
    return schema


def form_fields(model: type[BaseModel], *, skip: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """A Params form generated from a pydantic model (a model comparison's spec): per field, its
    ``default`` (absent when the field is required), ``title``, ``description`` and JSON Schema,
    with ``X | None`` as the type ``[X, "null"]``. Nested models are left out."""
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    fields: dict[str, dict[str, Any]] = {}
    for name, spec in schema["properties"].items():
        if name in skip or "$ref" in spec:
            continue
        spec = dict(spec)
        variants = spec.pop("anyOf", None)
        if variants:
            (typed,) = [v for v in variants if v.get("type") != "null"]
            spec.update(typed, type=[typed["type"], "null"])
        field_info = model.model_fields[name]
        entry = {"title": field_info.title or name.replace("_", " ").capitalize(),
                 "description": spec.pop("description", ""),
                 "schema": {k: v for k, v in spec.items() if k not in ("title", "default")}}
        if name not in required:
            entry["default"] = field_info.get_default(call_default_factory=True)
        fields[name] = entry
    return fields
