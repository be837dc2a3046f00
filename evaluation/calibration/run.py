"""The calibration as a job: judge a golden set through the pipeline's own stages
(:func:`judge_golden_set`), then measure and land the agreement (:func:`calibrate`);
:func:`run_calibration` does both (``python -m evaluation calibrate``).

Everything lands under ``calibrations/calibration_id=<id>/`` (:func:`evaluation.storage.calibration_key`):
``calibration.parquet`` (the ``calibrations`` table's rows), ``report.html``, ``spec.json``, and the
evidence: ``evaluations.parquet`` and ``judge_calls.parquet`` of the judged set (``evaluations``
columns plus ``forced_fail``), ``labels.parquet``, ``rejects.parquet`` and ``validation.json``.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import polars as pl

from evaluation import stages, storage
from evaluation.calibration.cascade import cascade_table, fit_bands, unit_costs
from evaluation.calibration.compute import calibration_rows, forced_fail, roc_curves
from evaluation.calibration.golden import GoldenSet, read_golden_set
from evaluation.calibration.render import render_page
from evaluation.calling import client
from evaluation.compare.compute import ProgressStart, judge_by_day, rounded_rows
from evaluation.contract.calibration import CalibrationError, CalibrationSpec
from evaluation.contract.config import EVALUATION_COLUMNS, JUDGE_STATUSES, CascadeLevel, RunConfig
from evaluation.contract.schemas import CASCADE_SCHEMA, record_from_row
from evaluation.judges import PROMPT_VERSIONS, RenderedPrompt, route, score_table
from evaluation.stages.cascade.bands import Bands, bands_of
from evaluation.storage.ledger import Ledger, request_hash

logger = logging.getLogger(__name__)

#: The figures a person reads first, per judge and metric (what the CLI prints).
_HEADLINE_COLUMNS = ["judge", "metric", "n", "auroc", "auroc_ci_low", "auroc_ci_high", "spearman", "kappa", "f1",
                     "best_borderline", "best_pass", "best_kappa", "suggested_borderline", "suggested_pass",
                     "suggested_kappa_holdout", "current_kappa_holdout"]


def prompt_versions(spec: CalibrationSpec) -> dict[str, str]:
    """The prompt version of each judge of the spec (what the calibration's id covers)."""

    return {judge: PROMPT_VERSIONS[judge] for judge in spec.judges}


def calibration_id(spec: CalibrationSpec) -> str:
    """The default id of a calibration: a hash of its spec and the judges' prompt versions."""
    return spec.default_id(prompt_versions(spec))


def _calls_to_make(store: storage.Store, spec: CalibrationSpec, judge_model: str, records: pl.DataFrame,
                   parameters: dict[str, Any]) -> int:
    """Judge calls of ``judge_model`` the set needs that the ledger has no reply for (0 on a re-run)."""

    missing = 0
    for (day,), group in records.group_by(pl.col("timestamp").dt.date(), maintain_order=True):
        hashes = set()
        for row in group.iter_rows(named=True):
            record = record_from_row(row)
            for judge in spec.judges:
                prompt = route(judge, record)
                if isinstance(prompt, RenderedPrompt):
                    hashes.add(request_hash(judge_model, prompt, parameters))
        found = Ledger(store, day, writer="calibration-lookup").lookup(hashes)
        missing += len(hashes) - len(found)
    return missing


def level_configs(spec: CalibrationSpec, *, date: dt.date, input_uri: str, output_uri: str,
                  run_id: str) -> list[RunConfig]:
    """The run configs a calibration judges its set with, one per model, cheapest first: each level
    of the spec's cascade (:meth:`~evaluation.contract.judge_settings.JudgeSettings.for_level`), then the
    judge model. Their judge settings are the spec's, as a run takes them, so a call's request hash
    is a run's for the same settings (temperature and structured output included)."""
    cfg = RunConfig(
        date=date, input_uri=input_uri, output_uri=output_uri, run_id=run_id, trigger="calibration",
        judges=list(spec.judges), thresholds=spec.thresholds, chunk_size=spec.chunk_size,
        **spec.judge_settings().model_dump(),
    )
    return [cfg.for_level(level) for level in spec.cascade] + [cfg]


def _land_golden_set(store: storage.Store, golden: storage.Store, spec: CalibrationSpec, *, calibration: str,
                     run_id: str) -> GoldenSet:
    """The golden set read and validated, its labels, rejects and validation result landed;
    :class:`CalibrationError` when it breaks a set-level rule."""
    golden_set = read_golden_set(golden, spec, run_id=run_id)
    storage.write_parquet(store, storage.calibration_key(calibration, "rejects.parquet"), golden_set.rejects)
    storage.write_json(store, storage.calibration_key(calibration, "validation.json"), golden_set.validation)
    storage.write_parquet(store, storage.calibration_key(calibration, "labels.parquet"), golden_set.labels)
    if golden_set.failures:
        logger.error("calibration %s: %s", calibration, "; ".join(golden_set.failures))
        raise CalibrationError("; ".join(golden_set.failures))
    return golden_set


def _probe_models(store: storage.Store, spec: CalibrationSpec, level_cfgs: list[RunConfig],
                  parameters_of: list[dict[str, Any]], records: pl.DataFrame, *, calibration: str,
                  api_key: str | None) -> None:
    """Probe each model the ledger leaves calls to pay for, before any is paid:
    :class:`CalibrationError` when one cannot be used."""
    for level_cfg, parameters in zip(level_cfgs, parameters_of, strict=True):
        if _calls_to_make(store, spec, level_cfg.judge_model, records, parameters):
            try:
                stages.probe_judge(client.judge_client(level_cfg, api_key), f"calibration {calibration}",
                                   timeout_s=level_cfg.probe_timeout_s)
            except stages.JudgeUnusable as exc:
                raise CalibrationError(f"calibration {calibration} ({spec.describe()}): {exc}") from exc


def _judge_models(level_cfgs: list[RunConfig], parameters_of: list[dict[str, Any]], stores: stages.Stores,
                  dated: pl.DataFrame, spec: CalibrationSpec, name: str, *, run_id: str, api_key: str | None,
                  progress: ProgressStart | None) -> tuple[list[pl.DataFrame], pl.DataFrame, int, int]:
    """The set judged by each model through the daily stages: each model's rows (as
    :func:`_judged_rows` lands them), all their calls, and the calls made and reused."""
    levels: list[pl.DataFrame] = []
    call_tables: list[pl.DataFrame] = []
    made = reused = 0
    for level_cfg, parameters in zip(level_cfgs, parameters_of, strict=True):
        advance = None if progress is None else progress(
            f"{name} with {level_cfg.judge_model}", dated.height * len(spec.judges))
        parsed, call_table, level_made, level_reused = judge_by_day(
            level_cfg, stores, dated, api_key=api_key, call_parameters=parameters, progress=advance)
        levels.append(_judged_rows(parsed, spec, run_id))
        call_tables.append(call_table)
        made, reused = made + level_made, reused + level_reused
    return levels, pl.concat(call_tables, how="vertical_relaxed"), made, reused


def judge_golden_set(
    store: storage.Store,
    golden: storage.Store,
    spec: CalibrationSpec,
    *,
    calibration: str,
    api_key: str | None = None,
    progress: ProgressStart | None = None,
) -> dict[str, Any]:
    """Read and validate the golden set, land its labels, rejects and validation result, judge its
    valid records with ``spec.judge_model`` through the daily stages (chunks in content-key order,
    the judge client, the day's ledger: a re-run pays nothing) and land the judged rows.
    ``progress`` starts the progress of each model's judging of the set.

    Raises :class:`CalibrationError` when the set breaks a set-level rule (after landing its
    rejects) or the judge model cannot be used; the probe call that checks the model is only made
    when the ledger leaves calls to pay for."""

    run_id = f"calibration-{calibration}"  # what its judge chunks are staged and ledgered under
    golden_set = _land_golden_set(store, golden, spec, calibration=calibration, run_id=run_id)
    records = golden_set.records
    # every model of a cascade judges the whole set (its bands are fitted on it), the judge model last
    level_cfgs = level_configs(spec, date=records["timestamp"].min().date(),  # type: ignore[union-attr]
                               input_uri=golden.root, output_uri=store.root, run_id=run_id)
    stores = stages.Stores(raw=golden, out=store)
    dated = records.with_columns(dt=pl.col("timestamp").dt.date())
    parameters_of = [client.call_parameters(level_cfg) for level_cfg in level_cfgs]
    _probe_models(store, spec, level_cfgs, parameters_of, records, calibration=calibration, api_key=api_key)
    levels, call_table, made, reused = _judge_models(level_cfgs, parameters_of, stores, dated, spec, golden_set.name,
                                                     run_id=run_id, api_key=api_key, progress=progress)
    evaluations = levels[-1]
    if spec.cascade:
        evaluations = _judge_cascade(store, stores, spec, level_cfgs[-1], dated, golden_set.labels, levels,
                                     calibration=calibration, api_key=api_key)
        storage.write_parquet(store, storage.calibration_key(calibration, "levels.parquet"), pl.concat(
            [rows.with_columns(level=pl.lit(k, dtype=pl.Int64)) for k, rows in enumerate(levels)]))
    storage.write_parquet(store, storage.calibration_key(calibration, "evaluations.parquet"), evaluations)
    storage.write_parquet(store, storage.calibration_key(calibration, "judge_calls.parquet"), call_table)
    statuses = dict(evaluations.group_by("judge_status").len().sort("judge_status").iter_rows())
    counts = {
        "calibration_id": calibration,
        "set": golden_set.name,
        "input_records": golden_set.input_records,
        "records": records.height,
        "rejected": golden_set.rejects.height,
        "rows": evaluations.height,
        "statuses": {s: int(statuses.get(s, 0)) for s in JUDGE_STATUSES},
        "calls_made": made,
        "calls_reused": reused,
        "cost_usd": round(sum(float(rows["cost_usd"].sum()) for rows in levels), 6),
    }
    storage.write_json(store, storage.calibration_key(calibration, "judging.json"),
                       {"spec": spec.model_dump(mode="json"), "set_info": golden_set.info, **counts})
    logger.info("calibration %s: judged %s: %s", calibration, spec.describe(), counts)
    return counts


def _judged_rows(parsed: pl.DataFrame, spec: CalibrationSpec, run_id: str) -> pl.DataFrame:
    """A judged set's rows as a calibration lands them: scored at the spec's thresholds, the
    ``evaluations`` columns plus ``forced_fail``."""
    return (score_table(parsed, spec.thresholds).with_columns(forced_fail(), run_id=pl.lit(run_id))
            .select(*EVALUATION_COLUMNS, "forced_fail").sort("record_id", "judge"))


def _judge_cascade(store: storage.Store, stores: stages.Stores, spec: CalibrationSpec, cfg: RunConfig,
                   records: pl.DataFrame, labels: pl.DataFrame, levels: list[pl.DataFrame], *, calibration: str,
                   api_key: str | None) -> pl.DataFrame:
    """The bands of the spec's cascade (given, taken from the calibration named, or fitted here:
    :func:`~evaluation.calibration.cascade.fit_bands`), kept in the calibration's ``cascade.parquet``,
    then the set judged through the cascade with them as a run judges a chunk (every reply is in the
    ledger by now: nothing is paid): the cascade's rows."""
    given: list[Bands | None] = [None if level.band is None and level.band_from is None
                                 else bands_of(store, level, list(spec.judges)) for level in spec.cascade]
    sources = ["given" if level.band is not None else level.band_from or "fitted" for level in spec.cascade]
    costs = unit_costs(levels, [client.price_per_token(model) for model in spec.models])
    bands = fit_bands(levels, labels, list(spec.judges), given, spec.band_loss, cut=spec.thresholds.borderline,
                      confidence=spec.band_confidence, costs=costs)
    storage.write_parquet(store, storage.calibration_key(calibration, "cascade.parquet"), pl.DataFrame(
        [{"calibration_id": calibration, "set_name": spec.set_name, "level": k, "judge_model": level.judge_model,
          "judge": judge, "band_low": low, "band_high": high, "band_source": sources[k], "band_loss": spec.band_loss}
         for k, level in enumerate(spec.cascade) for judge, (low, high) in bands[k].items()], schema=CASCADE_SCHEMA))
    logger.info("calibration %s: cascade bands %s (cost per row per level %s)", calibration, bands, costs)
    cascade = [CascadeLevel(judge_model=level.judge_model, band_from=calibration, api_base=level.api_base)
               for level in spec.cascade]
    parsed, _, _, _ = judge_by_day(cfg.for_level(None, cascade=cascade), stores, records, api_key=api_key,
                                   call_parameters=client.call_parameters(cfg))
    return _judged_rows(parsed, spec, cfg.run_id)


def calibrate(
    store: storage.Store,
    spec: CalibrationSpec,
    *,
    calibration: str,
    calibrated_at: dt.datetime,
) -> dict[str, Any]:
    """Measure the judged set against its labels and land ``calibration.parquet``, ``report.html``
    and ``spec.json`` (reads what :func:`judge_golden_set` landed for this calibration)."""
    keys = {name: storage.calibration_key(calibration, name)
            for name in ("evaluations.parquet", "labels.parquet", "judging.json")}
    missing = [k for k in keys.values() if not store.exists(k)]
    if missing:
        raise CalibrationError(f"calibration {calibration} ({spec.describe()}): the set has not been judged "
                               f"(no {store.uri(missing[0])})")
    judging = storage.read_json(store, keys["judging.json"])
    if judging.get("spec") != spec.model_dump(mode="json"):
        raise CalibrationError(f"calibration {calibration}: the set was judged for another spec; judge it again")
    evaluations = storage.read_parquet(store, keys["evaluations.parquet"])
    labels = storage.read_parquet(store, keys["labels.parquet"])
    table = calibration_rows(evaluations, labels, spec, calibration_id=calibration, calibrated_at=calibrated_at)
    storage.write_parquet(store, storage.calibration_key(calibration, "calibration.parquet"), table)
    cascade = _measure_cascade(store, spec, evaluations, labels, calibration, calibrated_at) if spec.cascade else None
    page = render_page(table, roc_curves(evaluations, labels, list(spec.judges)), spec, calibration, judging,
                       cascade=cascade)
    store.write_bytes(storage.calibration_key(calibration, "report.html"), page.encode())
    storage.write_json(store, storage.calibration_key(calibration, "spec.json"), {
        "calibration_id": calibration, "spec": spec.model_dump(mode="json"),
        "prompt_versions": prompt_versions(spec), "calibrated_at": calibrated_at.isoformat(),
        **{k: v for k, v in judging.items() if k != "spec"},
    })
    result = {
        "calibration_id": calibration,
        "uri": store.uri(storage.calibration_key(calibration, "")),
        "table_uri": store.uri(storage.calibration_key(calibration, "calibration.parquet")),
        "report_uri": store.uri(storage.calibration_key(calibration, "report.html")),
        "set": spec.set_name,
        "judge_model": spec.judge_model,
        **{k: judging[k] for k in ("records", "rejected", "calls_made", "calls_reused")},
        "figures": rounded_rows(table, _HEADLINE_COLUMNS),
    }
    if cascade is not None:
        result["cascade"] = rounded_rows(cascade, _CASCADE_COLUMNS)
    logger.info("calibration %s landed at %s", calibration, result["uri"])
    return result


#: The cascade's figures the CLI prints, per level and judge.
_CASCADE_COLUMNS = ["judge", "level", "judge_model", "band_low", "band_high", "band_source", "kappa_alone",
                    "kappa_alone_holdout", "reached", "decided", "share_decided", "cost_alone_usd", "cost_usd",
                    "kappa_cascade", "kappa_cascade_holdout"]


def _measure_cascade(store: storage.Store, spec: CalibrationSpec, evaluations: pl.DataFrame, labels: pl.DataFrame,
                     calibration: str, calibrated_at: dt.datetime) -> pl.DataFrame:
    """The cascade's figures per level and judge (:func:`~evaluation.calibration.cascade.cascade_table`)
    over each level's rows and the bands the judging kept, landed as ``cascade.parquet``."""
    key = storage.calibration_key(calibration, "cascade.parquet")
    kept = storage.read_parquet(store, key)
    everything = storage.read_parquet(store, storage.calibration_key(calibration, "levels.parquet"))
    levels = [everything.filter(pl.col("level") == k) for k in range(len(spec.cascade) + 1)]
    bands: list[Bands] = [{} for _ in spec.cascade]
    sources = ["given"] * len(spec.cascade)
    for row in kept.iter_rows(named=True):
        bands[row["level"]][row["judge"]] = (row["band_low"], row["band_high"])
        sources[row["level"]] = row["band_source"]
    table = cascade_table(levels, evaluations, labels, spec, bands, sources,
                          [client.price_per_token(model) for model in spec.models],
                          calibration_id=calibration, calibrated_at=calibrated_at)
    storage.write_parquet(store, key, table)
    return table


def run_calibration(
    store: storage.Store,
    golden: storage.Store,
    spec: CalibrationSpec,
    *,
    calibration: str | None = None,
    api_key: str | None = None,
    calibrated_at: dt.datetime | None = None,
    progress: ProgressStart | None = None,
) -> dict[str, Any]:
    """Judge the golden set and land the calibration (both steps in one process); ``progress`` as
    for :func:`judge_golden_set`."""
    calibration = storage.safe_id(calibration or calibration_id(spec))
    judge_golden_set(store, golden, spec, calibration=calibration, api_key=api_key, progress=progress)
    return calibrate(store, spec, calibration=calibration, calibrated_at=calibrated_at or dt.datetime.now(dt.UTC))
