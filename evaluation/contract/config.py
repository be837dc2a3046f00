"""Contract models: what the pipeline takes in (CONTRACT §1) and what a judge produces (§2, §3).

These are the boundaries of the product. Ingest turns raw log lines into :class:`InputRecord`;
judges turn an :class:`InputRecord` into a parsed row, each judge call is a :class:`CallRecord`;
scored rows land in the ``evaluations`` table whose columns are :data:`EVALUATION_COLUMNS`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)

from evaluation.contract.adapters import (
    INPUT_FORMATS,
    INPUT_LAYOUTS,
    accepted_baselines,
    check_input_format,
    check_input_layout,
    check_options,
    layout_of,
    parse_mapping,
)
from evaluation.contract.judge_settings import OFFLINE_JUDGE_MODEL as OFFLINE_JUDGE_MODEL
from evaluation.contract.judge_settings import JudgeEndpoint, JudgeSettings
from evaluation.contract.judge_settings import StructuredOutput as StructuredOutput

JudgeName = Literal["rag", "masis", "prompt"]
JUDGES: tuple[JudgeName, ...] = ("rag", "masis", "prompt")

JudgeStatus = Literal["ok", "parse_error", "judge_failed", "call_error", "skipped"]
JUDGE_STATUSES: tuple[JudgeStatus, ...] = ("ok", "parse_error", "judge_failed", "call_error", "skipped")

Verdict = Literal["pass", "borderline", "fail"]
VERDICTS: tuple[Verdict, ...] = ("pass", "borderline", "fail")


def comma_list(value: object) -> object:
    """A comma-separated string as the list of its non-blank parts (forms and flags give strings)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _judge_list(value: object) -> object:
    value = comma_list(value)
    if isinstance(value, list):  # the first of equal items kept (they need not be hashable yet)
        return [item for index, item in enumerate(value) if item not in value[:index]]
    return value


@dataclass(frozen=True)
class Cli:
    """Field metadata for its option (:mod:`evaluation.contract.options`): ``env``, the variable an empty
    value takes when the option is read (else the one derived from its name; ``""``: none);
    ``flags``, its spellings on the command line (else ``--field-name``); ``name``, the option of a
    nested model's field (``pass_threshold`` for ``thresholds.pass``); ``description`` and ``empty``
    (the value when the option and its variable are empty), where a spec's option says other than
    the field it inherits (a spec's ``OPTION_CLI``)."""

    env: str | None = None
    flags: tuple[str, ...] = ()
    name: str | None = None
    description: str | None = None
    empty: object = None


#: A string a form or a flag gives as text: shown as a plain string field.
FormText = WithJsonSchema({"type": "string"})

#: Judges as a list or a comma-separated string; a judge named twice counts once.
JudgeList = Annotated[list[JudgeName], BeforeValidator(_judge_list)]
def _segment_paths(value: object) -> object:
    value = _judge_list(value)
    if isinstance(value, list):
        for path in value:
            if not isinstance(path, str) or not SEGMENT_PATH.fullmatch(path):
                raise ValueError(f"segments: {path!r} is not a metadata path: write metadata.<field>[.<field>...], "
                                 "e.g. metadata.locale")
    return value


#: A segment is a metadata path: ``metadata.locale``, ``metadata.customer.tier``.
SEGMENT_PATH = re.compile(r"metadata(\.[A-Za-z0-9_-]+)+")
#: Metadata paths as a list or a comma-separated string; a path named twice counts once.
SegmentPaths = Annotated[list[str], BeforeValidator(_segment_paths), FormText]

#: Version of the deterministic rules (parsing, clamps, scores, verdicts). Bump on any change.
RULES_VERSION = "rules-2026.11.2"


class Context(BaseModel):
    """One retrieved piece of evidence."""

    id: str = Field(description="Citation id; `ctx-{index}` (1-based) when the log had none.")
    text: str = Field(description="The evidence text the answer may cite.")
    source: str | None = Field(default=None, description="Where the evidence came from.")
    score: float | None = Field(default=None, description="Retriever score, when logged.")


class Rubric(BaseModel):
    """One rubric item of seed 002's rubric mode."""

    id: str = Field(description="Rubric id; `rubric-{index}` (1-based) when the log had none.")
    description: str = Field(description="What the answer must do to satisfy the item.")
    weight: float = Field(default=1.0, ge=0.0, description="Share of the score; never negative.")
    required: bool = Field(default=True, description="An unsatisfied required item fails the verdict.")


class InputRecord(BaseModel):
    """One valid conversation turn, as the judges see it (CONTRACT §1, after normalisation)."""

    record_id: str = Field(description="Unique within the day.")
    conversation_id: str | None = Field(default=None, description="Groups turns of a conversation.")
    timestamp: dt.datetime = Field(description="When the answer was produced, in UTC.")
    model: str = Field(description="Model / app version that produced the answer.")
    question: str = Field(description="The user's question; never blank.")
    answer: str = Field(description="The answer under judgement; may be empty.")
    contexts: list[Context] = Field(default_factory=list, description="Retrieved evidence.")
    reference: str | None = Field(default=None, description="Reference answer, when known.")
    expected_outcome: str | None = Field(default=None, description="Seed 002's expected outcome.")
    rubrics: list[Rubric] | None = Field(default=None, description="Seed 002's rubric items.")
    evaluation_goal: str | None = Field(default=None, description="Seed 003's evaluation goal, raw.")
    metadata: str | None = Field(default=None, description="The log's metadata object as JSON text.")

    @model_validator(mode="before")
    @classmethod
    def _default_ids(cls, data: object) -> object:
        """Contexts without an id get `ctx-{index}`, rubrics `rubric-{index}` (1-based)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key, prefix in (("contexts", "ctx"), ("rubrics", "rubric")):
            items = data.get(key)
            if isinstance(items, list):
                data[key] = [
                    {**item, "id": f"{prefix}-{index}"} if isinstance(item, dict) and item.get("id") is None else item
                    for index, item in enumerate(items, start=1)
                ]
        if data.get("contexts") is None:
            data["contexts"] = []
        return data

    @property
    def reference_missing(self) -> bool:
        """Whether the reference counts as missing (CONTRACT §1)."""
        return self.reference is None or self.reference.strip().lower() in ("", "none")

    def untrusted_texts(self) -> list[str]:
        """Every piece of judged text that came from the logs (for the quote defence of §2.1)."""
        texts = [self.question, self.answer, *(c.text for c in self.contexts), self.reference, self.expected_outcome,
                 *(rubric.description for rubric in self.rubrics or [])]
        return [t for t in texts if t]


class CitationAudit(BaseModel):
    """The MASIS Critic's deterministic citation findings (CONTRACT §2.3)."""

    citations: list[str] = Field(description="Inner text of every `[...]`, raw, duplicates kept.")
    invalid_citations: list[str] = Field(description="Citations that are not exactly a context id.")
    uncited_claim_count: int = Field(description="Sentences with no `[` and no hedge phrase.")
    hallucination_detected: bool = Field(description="At least one invalid citation.")


class CallRecord(BaseModel):
    """What one judge call cost and returned, or a reply reused from the ledger: one row of
    `judge_calls`, the audit trail (built by the judge stage for every row that had a call)."""

    run_id: str = Field(description="The run that judged the record.")
    record_id: str = Field(description="The judged record.")
    judge: JudgeName = Field(description="The judge that was called.")
    judge_model: str = Field(description="The litellm model string of the judge.")
    prompt_version: str = Field(description="The judge's prompt version (a hash of its templates).")
    request_hash: str = Field(description="Hash of model, prompt version, messages and call parameters.")
    system_prompt: str = Field(description="Rendered system prompt sent to the judge.")
    user_prompt: str = Field(description="Rendered user prompt sent to the judge.")
    raw_response: str | None = Field(default=None, description="The judge's raw text, when it answered.")
    error: str | None = Field(default=None, description="`<class>: <message>` when the call failed.")
    error_class: str | None = Field(
        default=None,
        description="rate_limit, server_error, timeout, connection, bad_request, quota, or other.",
    )
    input_tokens: int = Field(default=0, description="Prompt tokens reported by the provider.")
    output_tokens: int = Field(default=0, description="Completion tokens reported by the provider.")
    cost_usd: float = Field(default=0.0, description="From litellm's bundled price map; 0 when unknown.")
    latency_ms: float = Field(default=0.0, description="Wall time of the call in ms (to 0.1 ms), retries included.")
    attempts: int = Field(default=0, description="HTTP attempts made (0 when served from the ledger).")
    cached: bool = Field(default=False, description="Served from the ledger of earlier calls.")
    judged_at: dt.datetime | None = Field(default=None, description="When the reply arrived (UTC).")
    redactions: int = Field(default=0, description="PII redactions applied to the prompts.")
    response_format: str | None = Field(
        default=None, description="How the call asked for its reply: `json_schema` (the judge's reply model as a "
        "schema), `json_object` (JSON mode), or null (the prompt alone).")


class Thresholds(BaseModel):
    """Verdict thresholds (CONTRACT §2.5): pass if score >= pass_, borderline if >= borderline."""

    pass_: Annotated[float, Cli(name="pass_threshold")] = Field(
        default=0.8, alias="pass", ge=0.0, le=1.0, title="Pass threshold", description="score >= this is pass.")
    borderline: Annotated[float, Cli(name="borderline_threshold")] = Field(
        default=0.6, ge=0.0, le=1.0, title="Borderline threshold",
        description="score >= this is borderline; below is fail.")

    model_config = ConfigDict(populate_by_name=True)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if self.borderline > self.pass_:
            raise ValueError(f"borderline threshold {self.borderline} is above pass threshold {self.pass_}")
        return self


class JudgeThresholds(Thresholds):
    """The thresholds one judge's verdicts use in a run, and where they came from (what the
    ``runs`` row's config records as ``thresholds_in_force``: ``{"pass", "borderline", "source"}``)."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    source: str = Field(
        default="options", description="`options` (the run's own thresholds) or `<calibration id>/<judge>`."
    )


def _threshold_references(value: object) -> object:
    """``thresholds_from`` as its comma-separated references, each ``<calibration id>/<judge>`` (or
    a calibration id alone), checked for shape and normalised (``a/rag,b/masis``); blank is None."""
    if not isinstance(value, str):
        return value
    references = [part.strip() for part in value.split(",") if part.strip()]
    named: list[str] = []
    for reference in references:
        calibration, slash, judge = reference.partition("/")
        if not calibration.strip() or (slash and judge not in JUDGES):
            raise ValueError(f"thresholds_from {reference!r}: expected <calibration id>/<judge> with a judge "
                             f"of {', '.join(JUDGES)}")
        if judge in named:
            raise ValueError(f"thresholds_from names judge {judge} twice")
        named += [judge] if judge else []
    return ",".join(references) or None


class Sample(BaseModel):
    """Deterministic sampling, stratified by model: a fraction, or a maximum per model."""

    fraction: float | None = Field(default=None, gt=0.0, le=1.0)
    max_per_model: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_of(self) -> Sample:
        if (self.fraction is None) == (self.max_per_model is None):
            raise ValueError("sample takes exactly one of fraction or max_per_model")
        return self


def _band(value: object) -> object:
    """A band as ``low:high`` text (a form's, a flag's) or a pair."""
    if isinstance(value, str):
        low, sep, high = value.partition(":")
        if not sep:
            raise ValueError(f"band {value!r}: expected low:high, e.g. 0.3:0.8")
        return (low.strip(), high.strip())
    return value


class CascadeLevel(JudgeEndpoint):
    """One level of a judge cascade, before the run's own judge model (the last level, which has no
    band): a cheaper judge model (its API base empty: the run's) and its uncertainty band. A (record,
    judge) row this level scores ``ok`` with a score outside the band is decided here; a score inside
    it (both ends included), or a row that is not ``ok``, goes to the next level. The settings the
    level is judged with are the run's, derived with :meth:`JudgeSettings.for_level`."""

    model_config = ConfigDict(extra="forbid")

    band: Annotated[tuple[float, float] | None, BeforeValidator(_band)] = Field(
        default=None, description="[low, high], scores inside it go to the next level (every judge alike).")
    band_from: str | None = Field(
        default=None, description="Id of a calibration of a cascade that fitted this model's band for each judge "
        "(its cascade.parquet).")

    @model_validator(mode="after")
    def _one_band(self) -> CascadeLevel:
        self.judge_model = self.judge_model.strip()
        if not self.judge_model:
            raise ValueError("cascade level: the judge model is blank")
        if self.band is not None:
            low, high = self.band
            if not 0.0 <= low <= high <= 1.0:
                raise ValueError(f"cascade level {self.judge_model}: band {low}:{high} is not 0 <= low <= high <= 1")
            if self.band_from is not None:
                raise ValueError(f"cascade level {self.judge_model}: give a band or band_from, not both")
        return self

    @model_serializer(mode="wrap")
    def _in_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data = handler(self)  # in the order before levels were endpoints, so that calibration ids stay
        return {key: data[key] for key in ("judge_model", "band", "band_from", "api_base") if key in data}

    def describe(self) -> str:
        """The level as the ``cascade`` option writes it: ``model@low:high``, ``model@<calibration id>``."""
        if self.band is not None:
            return f"{self.judge_model}@{self.band[0]:g}:{self.band[1]:g}"
        return f"{self.judge_model}@{self.band_from}" if self.band_from else self.judge_model


def _cascade_levels(value: object) -> object:
    """``cascade`` as its levels: comma-separated ``model@low:high`` or ``model@<calibration id>``
    (a form's, a flag's text; blank is none), or a list of such texts or of level objects."""
    items = comma_list(value)
    if not isinstance(items, list):
        return items
    levels: list[object] = []
    for item in items:
        if isinstance(item, str):
            model, at, spec = item.strip().rpartition("@")
            if not at:
                model, spec = spec, ""
            band = spec if ":" in spec else None
            if band is None and spec.replace(".", "", 1).isdigit():
                raise ValueError(f"cascade level {item.strip()!r}: band {spec}: expected low:high, e.g. 0.3:0.8")
            item = {"judge_model": model, "band": band, "band_from": None if band or not spec else spec}
        levels.append(item)
    return levels


#: The cascade as an option: its levels before the run's judge model, cheapest first.
CascadeLevels = Annotated[list[CascadeLevel], BeforeValidator(_cascade_levels), FormText]


def cascade_name(levels: list[CascadeLevel], judge_model: str) -> str:
    """A cascade as one judge's name: its models, cheapest first, ending with the run's judge model
    (``offline/lexical > openai/gpt-4o-mini > openai/gpt-4o``); the judge model alone without one."""
    return " > ".join([*(level.judge_model for level in levels), judge_model])


def check_cascade(levels: list[CascadeLevel], judge_model: str, *, bands_required: bool) -> None:
    """A cascade's models are distinct and none is the judge model (its last level); a run's levels
    each name a band or the calibration that fitted one (a calibration of a cascade fits the rest)."""
    models = [level.judge_model for level in levels] + [judge_model]
    repeated = sorted({m for m in models if models.count(m) > 1})
    if repeated:
        raise ValueError(f"cascade: a model is named twice (the judge model is its last level): {', '.join(repeated)}")
    unbanded = [level.judge_model for level in levels if level.band is None and level.band_from is None]
    if bands_required and unbanded:
        raise ValueError(f"cascade: level {unbanded[0]} has no band: write {unbanded[0]}@low:high or "
                         f"{unbanded[0]}@<calibration id>")


#: RunConfig's fields that are not run options: the run sets them itself, or they are fixed.
RUN_INTERNALS = ("date", "run_id", "trigger", "thresholds_in_force", "temperature", "max_map_length")


class _RunInput(BaseModel):
    """The day a run reads and where it lands (the run's first fields, before the judge's settings)."""

    date: dt.date = Field(description="The day (`dt`) to evaluate.")
    input_uri: Annotated[str, Cli(flags=("--input", "--input-uri"))] = Field(
        title="Input URI",
        description="Root of the raw logs: s3://bucket/prefix or a directory; the day is read from dt=YYYY-MM-DD/.")
    output_uri: Annotated[str, Cli(flags=("--output", "--output-uri"))] = Field(
        title="Output URI", description="Root of the landed tables: s3://bucket/prefix or a directory.")
    input_format: Annotated[str, BeforeValidator(check_input_format)] = Field(
        default="own", title="Input format", json_schema_extra={"enum": list(INPUT_FORMATS)},
        description="Shape of the raw records: own (the contract's fields), openai-chat (a messages list in the "
        "OpenAI chat format), litellm (LiteLLM's S3 logging, one call per object) or otel (OpenTelemetry traces "
        "as the collector's S3 exporter writes them, OTLP JSON). See docs/inputs.md.")
    input_layout: Annotated[str, BeforeValidator(check_input_layout), FormText] = Field(
        default="", validate_default=True, title="Input layout", json_schema_extra={"enum": ["", *INPUT_LAYOUTS]},
        description="Where a day's objects lie under the input root: hive (dt=YYYY-MM-DD/), date (YYYY-MM-DD/, "
        "hour folders below it or not) or ymd (year=YYYY/month=MM/day=DD/, hour and minute folders below). Empty: "
        "the input format's own (date for litellm, ymd for otel, hive for the others).")
    input_mapping: Annotated[dict[str, str], BeforeValidator(parse_mapping), FormText] = Field(
        default="", validate_default=True, title="Input mapping",
        description="Fields read from other places of a record, on top of the input format: field=path pairs "
        "separated by commas, e.g. question=request.messages[-1].content,answer=response.text.")
    run_id: str = Field(default="manual", description="Id of this run; names its work files.")
    trigger: str = Field(default="cli", description="What started the run (scheduled, manual, cli).")
    judges: JudgeList = Field(default_factory=lambda: list(JUDGES), min_length=1, description="Judges to run: rag, masis, prompt.")


class RunConfig(JudgeSettings, _RunInput):
    """Everything one evaluation run of one day needs: the day, the judge's settings (flat), the rest.
    Its fields (but :data:`RUN_INTERNALS`) are the run options: the DAG's Params and the flags of ``run``
    and ``plan`` are generated from them (:mod:`evaluation.contract.options`)."""

    model_config = ConfigDict(extra="forbid")

    cascade: CascadeLevels = Field(
        default="", validate_default=True, title="Cascade",
        description="Cheaper judge models tried before the judge model, cheapest first, comma-separated: "
        "model@low:high (a row scored inside the band goes to the next level, outside it is decided there) or "
        "model@<calibration id> (the band a calibration of the cascade fitted for each judge), e.g. "
        "offline/lexical@0.2:0.9,openai/gpt-4o-mini@cal-1; the judge model decides what is left.")
    chunk_size: int = Field(default=500, ge=1, description="Records per judge chunk (one mapped task each).")
    thresholds: Thresholds = Field(default_factory=Thresholds)
    thresholds_from: Annotated[str | None, BeforeValidator(_threshold_references), FormText] = Field(
        default="", validate_default=True, title="Thresholds from a calibration",
        description="<calibration id>/<judge>, comma-separated for several judges (cal-1/rag,cal-2/masis): "
        "that judge's verdicts use the thresholds the calibration fitted for it (its score row); every other judge "
        "keeps the two above. The runs row records each judge's thresholds and source.")
    thresholds_in_force: dict[JudgeName, JudgeThresholds] = Field(default_factory=dict, description=(
        "Per selected judge, the thresholds its verdicts use and their source; filled when the run "
        "reads its `thresholds_from` calibrations (empty before)."))
    max_reject_ratio: float = Field(default=0.05, ge=0.0, le=1.0, description=(
        "Fail the run (after landing rejects) when more input records than this share are rejected."))
    max_record_chars: int = Field(default=200_000, ge=1, description="Reject records whose texts exceed this.")
    allow_empty: bool = Field(default=False, title="Allow empty day", description="Succeed when the day has no input objects.")
    completion_marker: str = Field(
        default="", title="Completion marker",
        description="Name of the object (e.g. _SUCCESS) under the day's prefix that says the day's export is "
        "complete: the DAG waits for it before ingesting. Without one, the quiet period decides.")
    quiet_period_s: float = Field(
        default=300.0, ge=0.0, title="Quiet period (s)",
        description="Without a completion marker, the day is complete once no object has been added under its "
        "prefix for this long (0: do not wait).")
    wait_deadline_s: float = Field(
        default=21600.0, gt=0.0, title="Wait deadline (s)",
        description="How long the DAG waits for the day to be complete (marker or quiet period) before the run fails.")
    absent_deadline_s: float = Field(
        default=3600.0, gt=0.0, title="Absent deadline (s)",
        description="How long the DAG waits for a day whose input prefix holds no object at all before the run fails "
        "naming the prefix (a wrong input_uri, or an export that did not run); once an object is there, the wait "
        "goes on up to wait_deadline_s. Not with allow_empty.")
    max_call_error_ratio: float = Field(
        default=0.2, ge=0.0, le=1.0, title="Max call-error ratio",
        description="Fail the run (after landing) when more judge calls than this share end in call_error.")
    sample: Annotated[Sample | None, FormText] = Field(
        default="", validate_default=True, title="Sample",
        description="A fraction (0.25) or a count per model (200), stratified by model; none: every record.")
    budget_usd: float | None = Field(default=None, ge=0.0, title="Budget (USD)",
                                     description="Stop new judge calls once this much is spent (shared evenly by "
                                                 "the chunks; in batch mode, submit only the requests it is "
                                                 "expected to pay for).")
    redact_pii: bool = Field(default=False, title="Redact PII",
                             description="Redact emails, phone numbers, cards, IBANs and IPs before text reaches the judge.")
    rejudge_parse_errors: bool = Field(
        default=False, title="Re-judge parse errors",
        description="Call the judge again where the stored reply does not parse (parse_error), e.g. after a "
        "provider glitch; the new reply replaces the old one in the ledger. Off: stored replies are reused as "
        "they are, never paid for twice.")
    batch: bool = Field(
        default=False, title="Batch mode",
        description="Send each chunk's judge calls as provider batches (OpenAI or Azure batch API: batch prices, "
        "results within 24 h); the judge task waits deferred, holding no worker slot.")
    batch_deadline_h: float = Field(
        default=48.0, gt=0.0, title="Batch deadline (h)",
        description="Hours after a chunk's first batch within which an expired or cancelled batch's missing "
        "requests, and lines that failed for a transient reason (5xx, 429, timeout; up to max_attempts runs), are "
        "submitted again; past it they end as call_error.")
    batch_poll_s: float = Field(default=60.0, gt=0.0, title="Batch poll interval (s)",
                                description="Seconds between two looks at a batch.")
    batch_max_requests: int | None = Field(
        default=None, ge=0, description="Requests per provider batch: a chunk's batch is split into parts of at most "
        "this many. None or 0: the provider's limit (OpenAI and Azure 50,000).")
    batch_max_bytes: int | None = Field(
        default=None, ge=0, description="Bytes of a provider batch's input file: a chunk's batch is split into parts "
        "of at most this size. None or 0: the provider's limit (OpenAI and Azure 200 MB).")
    segments: SegmentPaths = Field(
        default="", validate_default=True, title="Segments",
        description="Metadata paths (comma-separated, e.g. metadata.locale,metadata.route) whose values the day's "
        "measures and flags are also computed by, per model: the most frequent values each, the rest as other.")
    accept_baseline: Annotated[dict[str, dt.date], BeforeValidator(accepted_baselines), FormText] = Field(
        default="", validate_default=True, description="MODEL=YYYY-MM-DD pairs, comma-separated: the report takes "
        "each model's days from that day on as its baseline (its regression ends; docs/alerts.md).")
    dry_run: bool = Field(
        default=False, title="Dry run",
        description="Stop after planning: read and validate the day and estimate its calls, tokens, cost and time "
        "(in the plan task's log and result); no judge call, nothing landed.")
    max_map_length: int = Field(default=1024, ge=1, description="Airflow's [core] max_map_length.")

    @field_validator("sample", mode="before")
    @classmethod
    def _parse_sample(cls, value: object) -> object:
        """A whole number (`100`, `"100"`) is a maximum per model; any other number a fraction; blank is none."""
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            return value
        if isinstance(value, str) and not value.strip():
            return None
        if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
            return Sample(max_per_model=int(value))
        try:
            return Sample(fraction=float(value))
        except ValueError:
            raise ValueError("sample is a fraction in (0, 1] (0.25) or a count per model (200)") from None

    @model_validator(mode="after")
    def _cascade(self) -> RunConfig:
        check_cascade(self.cascade, self.judge_model, bands_required=True)
        return self

    @model_validator(mode="after")
    def _input(self) -> RunConfig:
        check_options(self.input_format, self.input_mapping)
        self.input_layout = layout_of(self.input_format, self.input_layout)  # the config records the layout read
        return self

    def level_config(self, level: int) -> RunConfig:
        """This run as one level of its cascade judges it: that level's judge model and API base (the
        run's own for the last level), no cascade; validated (:meth:`JudgeSettings.for_level`)."""
        return self.for_level(self.cascade[level] if level < len(self.cascade) else None, cascade=[])

    def with_thresholds_in_force(self, calibrated: Mapping[str, JudgeThresholds]) -> RunConfig:
        """This config with ``thresholds_in_force`` for every selected judge: ``calibrated`` where
        it names the judge, else the run's own ``thresholds`` (source ``options``)."""
        own = JudgeThresholds.model_validate({**self.thresholds.model_dump(), "source": "options"})
        in_force = {judge: calibrated.get(judge, own) for judge in self.judges}
        return self.model_copy(update={"thresholds_in_force": in_force})


def question_key(question: str) -> str:
    """A stable key of a question (``evaluations.question_key``): 16 hex digits of the SHA-256 of
    its normalised text (Unicode NFKC, case-folded, runs of white space as one space, punctuation
    and symbols stripped at both ends), so that two models' answers to the same question pair up
    in comparisons whatever the judge templates look like."""
    normalised = " ".join(unicodedata.normalize("NFKC", question).casefold().split())
    start, end = 0, len(normalised)
    while start < end and _is_edge_mark(normalised[start]):
        start += 1
    while end > start and _is_edge_mark(normalised[end - 1]):
        end -= 1
    return hashlib.sha256(normalised[start:end].encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _is_edge_mark(char: str) -> bool:
    """Punctuation, a symbol or white space: stripped from both ends of a question's key text."""
    return char.isspace() or unicodedata.category(char)[0] in "PS"


#: Columns of the `evaluations` table, in landing order (CONTRACT §3).
EVALUATION_COLUMNS: tuple[str, ...] = (
    "dt", "run_id", "record_id", "conversation_id", "question_key", "model", "judge", "judge_model",
    "prompt_version", "rules_version", "judge_status", "verdict", "score", "faithfulness",
    "relevance", "completeness", "reasoning_quality", "context_relevance", "answer_relevance",
    "semantic_similarity", "evaluation_goal", "hits", "misses", "reasoning", "explanations",
    "improvement_suggestions", "citations", "invalid_citations", "uncited_claim_count",
    "hallucination_detected", "clamps_applied", "reason", "error", "input_tokens",
    "output_tokens", "cost_usd", "latency_ms", "attempts", "cached", "judged_at", "decided_by", "cascade_calls",
)


class Retention(BaseModel):
    """How long working data is kept, in days (0 deletes everything that is not in use). Its fields are
    the options of ``gc`` and of the maintenance DAG, each with its ``EVALUATION_<OPTION>`` variable."""

    model_config = ConfigDict(extra="forbid")

    work_days: int = Field(default=3, ge=0, description="Days a failed or dead run's `_work/` folder, and an object "
                                                         "of a day table that no day's commit names, are kept.")
    failed_days: int = Field(default=30, ge=0, description="Days a failed run's evidence under `_failed/` is kept.")
    ledger_days: int = Field(
        default=35, ge=0,
        description="Days after `dt` that a day's ledger (and claim) is kept; a re-run after that pays again.",
    )
