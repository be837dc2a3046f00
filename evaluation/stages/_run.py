"""What every stage of a run shares: its errors, its stores, the claim on its day, its typed
results and manifest, the evidence of a failed run and the run's ``runs`` row."""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from evaluation import storage
from evaluation.contract.config import JUDGE_STATUSES, RunConfig
from evaluation.contract.errors import EvaluationError, JudgeError
from evaluation.contract.reject_summary import ReasonCount, as_json
from evaluation.contract.schemas import runs_schema
from evaluation.stages import versions

logger = logging.getLogger("evaluation.stages")


class RunFailed(EvaluationError, RuntimeError):
    """A run-level failure: the message names the run, the day and the cause; ``reject_reasons``
    are the counts by reason of the rejects that failed it (empty when rejects were not the cause)."""

    def __init__(self, message: str, reject_reasons: list[ReasonCount] | None = None) -> None:
        super().__init__(message)
        self.reject_reasons = list(reject_reasons or [])


class StaleRun(RunFailed):
    """Another, newer run owns the day: this one may not land."""


class JudgeUnreachable(JudgeError, RuntimeError):
    """The judge model's endpoint did not answer the probe call (a transient failure: retry)."""


class JudgeUnusable(JudgeError, ValueError):
    """The judge model cannot be used: litellm cannot resolve it, or its endpoint refused the
    probe call for good (unknown model, bad key, quota)."""


@dataclass
class Stores:
    """The input and output stores of a run."""

    raw: storage.Store
    out: storage.Store

    @classmethod
    def open(cls, cfg: RunConfig, s3: storage.S3Access | None = None) -> Stores:
        """Stores for the config's URIs (one S3 access shared when both are on S3; boto3's own
        chain unless ``s3`` is given)."""
        return cls(*storage.open_stores(cfg.input_uri, cfg.output_uri, s3=s3))


def where(cfg: RunConfig) -> str:
    """``run <id> of <day>``: how messages name a run."""
    return f"run {cfg.run_id} of {cfg.date.isoformat()}"


def claim_day(cfg: RunConfig, stores: Stores) -> None:
    """Make this run the owner of the day's landing (a newer run takes the claim over)."""
    storage.write_json(stores.out, storage.claim_key(cfg.date), {"run_id": cfg.run_id, "trigger": cfg.trigger})


def check_claim(cfg: RunConfig, stores: Stores) -> None:
    """Refuse to land when a newer run has claimed the day since this one started."""
    key = storage.claim_key(cfg.date)
    owner = storage.read_json(stores.out, key).get("run_id") if stores.out.exists(key) else None
    if owner not in (None, cfg.run_id):
        raise StaleRun(f"{where(cfg)}: run {owner} has claimed the day since; this run may not land")


class StageResult(BaseModel):
    """What a stage returns: small, JSON-ready (the DAG passes ``model_dump(mode="json")``
    through XCom), and readable by key like that JSON (``result["valid"]``)."""

    model_config = ConfigDict(extra="forbid")

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)


class CheckResult(StageResult):
    """The judge model answered its probe call."""

    judge_model: str = Field(description="The litellm model string that answered.")
    probe_latency_ms: float = Field(description="How long the probe call took.")
    call_parameters: dict[str, Any] = Field(description="Parameters that shape a reply (part of the ledger key).")


class IngestCounts(StageResult):
    """The day's input, as ingest and validation counted it (CONTRACT §4: input = valid + rejected)."""

    objects: int = Field(description="Raw objects read under the day's prefix.")
    input: int = Field(description="Input records (lines or rows) of those objects.")
    valid: int = Field(description="Records that passed every row rule.")
    rejected: int = Field(description="Records rejected, with their reasons, into `rejects`.")
    skipped: dict[str, int] = Field(
        default_factory=dict, description="Logged calls that are not records to judge, by why (a failed call, an "
        "embedding call, ...): neither input records nor rejects.")


class CostEstimate(StageResult):
    """The plan's estimate of the day's judge calls, tokens and cost."""

    records: int = Field(description="Records the run judges (after sampling).")
    calls: int = Field(default=0, description="Judge calls expected: records × the judges that apply, empty answers left out (no call).")
    prompt_tokens: int = Field(description="Prompt tokens expected, by the judge model's tokenizer.")
    output_tokens: int = Field(default=0, description="Completion tokens expected (each judge's typical reply: evaluation.calling.cost).")
    cost_usd: float = Field(description="Cost at litellm's online prices for the judge model.")
    batch_cost_usd: float | None = Field(
        default=None, description="Cost at litellm's batch prices (its online ones where it has none); "
        "None when the judge model's provider has no batch API.")
    sampled_records: int = Field(description="Records rendered to make the estimate.")


class ChunkPlan(StageResult):
    """One staged chunk: what a mapped judge task receives."""

    index: int = Field(description="The chunk's number, from 0.")
    records: int = Field(description="Records in the chunk.")
    key: str = Field(description="Where the chunk's records are staged, relative to the output root.")


class ChunkResult(StageResult):
    """What judging one chunk did."""

    index: int = Field(description="The chunk's number.")
    rows: int = Field(description="(record, judge) rows staged.")
    calls_made: int = Field(description="Judge calls sent (each with its retries).")
    reused: int = Field(description="Replies reused from the ledger or repeated within the chunk.")
    statuses: dict[str, int] = Field(description="Rows by judge_status.")
    seconds: float = Field(description="Wall time of the stage.")
    decided: dict[str, int] = Field(default_factory=dict,
                                    description="With a cascade: rows decided per level's judge model.")


class DayResult(StageResult):
    """A landed day (what ``python -m evaluation run`` prints, with the counts of CONTRACT §4)."""

    run_id: str
    dt: str
    objects: int
    input: int
    valid: int
    rejected: int
    skipped: dict[str, int] = Field(default_factory=dict, description="Logged calls not judged, by why.")
    judges: list[str]
    rows: int
    statuses: dict[str, int]
    verdicts: dict[str, int]
    calls_made: int
    calls_reused: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    call_error_ratio: float
    output_uri: str
    reconciled: dict[str, int] = Field(default_factory=dict)
    cascade: dict[str, Any] | None = Field(
        default=None, description="With a cascade: each level's decided rows, calls and cost, and the judge model "
        "alone's cost (see evaluation.stages.cascade.summary.cascade_summary).")
    report: str | None = Field(default=None, description="The daily report's URI, once written.")


class IngestRecord(BaseModel):
    """What ingest staged for the later stages (``_work/.../ingest.json``)."""

    counts: IngestCounts
    valid_parts: int = Field(description="Staged parts of valid records (``valid/part-NNNNN.parquet``).")
    seconds: float


class PlanRecord(BaseModel):
    """What plan staged for the judge and land stages (``_work/.../plan.json``)."""

    chunks: int
    chunk_size: int = Field(description="Records per chunk (raised to stay within max_map_length).")
    sampled: int = Field(description="Records to judge; the others are skipped as sampled_out.")
    estimate: CostEstimate
    call_parameters: dict[str, Any] = Field(description="Parameters that shape a reply (part of the ledger key).")
    cascade_parameters: list[dict[str, Any]] = Field(
        default_factory=list, description="With a cascade: the call parameters of each level before the judge model.")
    seconds: float


class Manifest(BaseModel):
    """A run's staged records, one object per stage that wrote it (no read-modify-write)."""

    ingest: IngestRecord | None = None
    plan: PlanRecord | None = None

    @property
    def timings(self) -> dict[str, float]:
        """Seconds per finished stage."""
        stages = (("ingest_validate_s", self.ingest), ("plan_s", self.plan))
        return {name: record.seconds for name, record in stages if record is not None}


def _record_key(cfg: RunConfig, stage: str) -> str:
    return storage.work_key(cfg.date, cfg.run_id, f"{stage}.json")


def write_record(cfg: RunConfig, stores: Stores, stage: str, record: BaseModel) -> None:
    """Stage ``stage``'s record of the run (``ingest`` or ``plan``)."""
    storage.write_json(stores.out, _record_key(cfg, stage), record.model_dump(mode="json"))


def read_manifest(cfg: RunConfig, stores: Stores) -> Manifest:
    """Every stage record the run has staged so far."""
    keys = {stage: _record_key(cfg, stage) for stage in ("ingest", "plan")}
    return Manifest.model_validate({stage: storage.read_json(stores.out, key) for stage, key in keys.items()
                                    if stores.out.exists(key)})


#: What ingest stages for the landing: the day's rejects and its validation result.
STAGED = {"rejects": "rejects.parquet", "validation": "validation.json"}


def valid_part_key(cfg: RunConfig, index: int) -> str:
    """A part of the valid records ingest staged."""
    return storage.work_key(cfg.date, cfg.run_id, f"valid/part-{index:05d}.parquet")


def staged_key(cfg: RunConfig, name: str) -> str:
    """Where ingest stages ``name`` (rejects, validation) of the run until the landing."""
    return storage.work_key(cfg.date, cfg.run_id, STAGED[name])


def fail_run(
    cfg: RunConfig,
    stores: Stores,
    message: str,
    *,
    scored: dict[str, Path] | None = None,
    result: dict[str, Any] | None = None,
    started_at: dt.datetime | None = None,
    waited_s: float | None = None,
    reject_reasons: list[ReasonCount] | None = None,
) -> RunFailed:
    """Record a run that broke a run-level rule and return the error to raise: its staged rejects
    and validation result, and any ``scored`` tables (name -> local Parquet file), go under
    ``_failed/``; its ``runs`` row says ``failed`` with the cause (and ``reject_reasons``, the
    counts by reason of rejects that failed it). The day's landed tables are not touched."""
    for name in STAGED:
        if stores.out.exists(staged_key(cfg, name)):
            stores.out.copy(staged_key(cfg, name), storage.failed_key(cfg.date, cfg.run_id, STAGED[name]))
    for name, path in (scored or {}).items():
        stores.out.upload_file(storage.failed_key(cfg.date, cfg.run_id, f"{name}.parquet"), path)
    manifest = read_manifest(cfg, stores)
    counts = manifest.ingest.counts.model_dump() if manifest.ingest is not None else {}
    write_run_row(cfg, stores, {**counts, **(result or {})}, manifest, manifest.timings, "failed", message,
                  started_at, evidence_uri=stores.out.uri(storage.failed_prefix(cfg.date, cfg.run_id)),
                  waited_s=waited_s, reject_reasons=reject_reasons)
    logger.error("%s", message)
    return RunFailed(message, reject_reasons)


def write_run_row(
    cfg: RunConfig,
    stores: Stores,
    result: dict[str, Any],
    manifest: Manifest,
    timings: dict[str, Any],
    status: str,
    message: str | None,
    started_at: dt.datetime | None,
    *,
    evidence_uri: str | None = None,
    waited_s: float | None = None,
    reject_reasons: list[ReasonCount] | None = None,
) -> None:
    """Land the run's row of the ``runs`` table (its own object: runs keep their history). A
    failed run's row names where its evidence is (``evidence_uri``); ``waited_s`` is how long the
    run waited for its day to be complete (None: no wait); ``reject_reasons`` why its records were
    rejected, when that failed it. Its ``config`` holds the thresholds each judge's verdicts used
    (``thresholds_in_force``), empty only for a run with ``thresholds_from`` that failed before
    reading its calibrations."""

    if not cfg.thresholds_in_force and cfg.thresholds_from is None:  # a run that failed before scoring
        cfg = cfg.with_thresholds_in_force({})
    row = {
        "run_id": cfg.run_id,
        "trigger": cfg.trigger,
        "status": status,
        "message": message,
        "evidence_uri": evidence_uri,
        "config": cfg.model_dump_json(),
        "pass_threshold": cfg.thresholds.pass_,
        "borderline_threshold": cfg.thresholds.borderline,
        "thresholds_from": cfg.thresholds_from,
        "input_records": result.get("input", 0),
        "valid_records": result.get("valid", 0),
        "rejected_records": result.get("rejected", 0),
        "reject_reasons": as_json(reject_reasons) if reject_reasons else None,
        "rows": result.get("rows", 0),
        **{f"n_{s}": result.get("statuses", {}).get(s, 0) for s in JUDGE_STATUSES},
        "calls_made": result.get("calls_made", 0),
        "calls_reused": result.get("calls_reused", 0),
        "input_tokens": result.get("input_tokens", 0),
        "output_tokens": result.get("output_tokens", 0),
        "cost_usd": result.get("cost_usd", 0.0),
        "estimated_prompt_tokens": manifest.plan.estimate.prompt_tokens if manifest.plan else 0,
        "estimated_cost_usd": manifest.plan.estimate.cost_usd if manifest.plan else 0.0,
        "timings": json.dumps(timings, sort_keys=True),
        "waited_s": waited_s,
        "versions": json.dumps(versions.versions(), sort_keys=True),
        "cascade": json.dumps(result["cascade"], sort_keys=True) if result.get("cascade") else None,
        "started_at": started_at,
        "finished_at": dt.datetime.now(dt.UTC),
    }
    frame = pl.DataFrame([row], schema=runs_schema())  # typed even where null (strict readers)
    storage.write_parquet(stores.out, storage.run_key(cfg.date, cfg.run_id), frame)

