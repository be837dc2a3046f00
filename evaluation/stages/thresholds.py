"""What a run takes from a landed calibration, checked before anything is paid for: the thresholds
of ``thresholds_from`` (read from the ``calibrations`` table, checked against the run's judges).
The bands of a cascade's levels with ``band_from`` are the cascade's
(:mod:`evaluation.stages.cascade.bands`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import polars as pl

from evaluation import storage
from evaluation.contract.calibration import CalibrationError
from evaluation.contract.config import JudgeName, JudgeThresholds, RunConfig, Thresholds, cascade_name
from evaluation.judges import PROMPT_VERSIONS

logger = logging.getLogger(__name__)


#: Labelled rows of a judge's fit split below which a calibration's thresholds are not taken: a cut
#: chosen to maximise κ on fewer rows follows the sample more than the judge.
MIN_FIT_ROWS = 30


def calibrated_thresholds(store: storage.Store, reference: str, configured: Thresholds, *,
                          judge_model: str | None = None, prompt_versions: Mapping[JudgeName, str] | None = None
                          ) -> JudgeThresholds:
    """The thresholds a calibration fitted for one judge (its ``score`` row). ``reference`` is
    ``<calibration id>/<judge>``, or the id alone when the calibration covers one judge.

    Refused (:class:`CalibrationError`) when the calibration judged with another judge model than
    ``judge_model`` (the run's: its judge model, or its cascade's name), or with another prompt
    version of the judge than ``prompt_versions`` gives (judge -> the run's prompt version):
    thresholds fitted to one judge do not carry to another. (Unchecked when not given.)

    Refused (:class:`CalibrationError`) when the judge had fewer than :data:`MIN_FIT_ROWS`
    labelled rows to fit on, or no thresholds were fitted. Fitted against expected verdicts, both
    cuts are the calibration's; fitted against a binary label, only the pass cut is: the borderline
    stays ``configured``'s, or, where that is not below the fitted pass cut, sits the configured
    band's width under it, so the band never collapses onto the pass cut unless it was fitted so."""
    calibration, _, judge = reference.partition("/")
    key = storage.calibration_key(calibration, "calibration.parquet")
    if not store.exists(key):
        raise CalibrationError(f"thresholds_from {reference!r}: no calibration at {store.uri(key)}")
    scores = storage.read_parquet(store, key).filter(pl.col("metric") == "score")
    judges = ", ".join(scores["judge"].to_list()) or "none"
    rows = scores.filter(pl.col("judge") == judge) if judge else scores
    if rows.height != 1:
        raise CalibrationError(f"thresholds_from {reference!r}: name one judge of calibration {calibration} as "
                               f"<calibration id>/<judge> (its judges: {judges})")
    row = rows.row(0, named=True)
    source = f"{calibration}/{row['judge']}"
    check_applies(reference, row, judge_model, prompt_versions or {})
    fitted_on = row["n_fit"] or 0
    if fitted_on < MIN_FIT_ROWS:
        raise CalibrationError(
            f"thresholds_from {reference!r}: judge {row['judge']} had {fitted_on} labelled rows to fit thresholds "
            f"on ({row['n_ok']} ok rows of {row['n_records']} records); at least {MIN_FIT_ROWS} are needed: "
            "calibrate on a larger golden set, or leave this judge at the run's own thresholds")
    passing, borderline = row["suggested_pass"], row["suggested_borderline"]
    if passing is None or borderline is None:
        raise CalibrationError(f"thresholds_from {reference!r}: calibration {calibration} fitted no thresholds for "
                               f"judge {row['judge']} (its labels on the fit split may all be of one class)")
    if row["suggested_by"] == "verdict":  # three verdicts labelled: the band itself was fitted
        return JudgeThresholds.model_validate({"pass": max(passing, borderline), "borderline": borderline,
                                               "source": source})
    borderline = configured.borderline
    if borderline >= passing:  # the configured band's width under the fitted pass cut
        borderline = round(max(0.0, passing - (configured.pass_ - configured.borderline)), 6)
    return JudgeThresholds.model_validate({"pass": passing, "borderline": borderline, "source": source})


def check_applies(reference: str, row: dict[str, object], judge_model: str | None,
                  prompt_versions: Mapping[JudgeName, str]) -> None:
    """Refuse a calibration ``row`` made with another judge model or prompt version (see
    :func:`calibrated_thresholds`)."""
    if judge_model is not None and row["judge_model"] != judge_model:
        raise CalibrationError(f"thresholds_from {reference!r}: the calibration judged with {row['judge_model']}, "
                               f"this run with {judge_model}: calibrate {judge_model}, or leave thresholds_from empty")
    current = next((v for judge, v in prompt_versions.items() if judge == row["judge"]), None)
    if current is not None and row["prompt_version"] != current:
        raise CalibrationError(f"thresholds_from {reference!r}: the calibration judged with prompt "
                               f"{row['prompt_version']}, this run with {current} (the prompt changed since): "
                               "calibrate again, or leave thresholds_from empty")


def with_calibrated_thresholds(cfg: RunConfig, store: storage.Store) -> RunConfig:
    """``cfg`` with its ``thresholds_in_force``: for each judge its ``thresholds_from`` names, the
    thresholds that calibration fitted for it; for every other selected judge, the run's own."""
    calibrated: dict[str, JudgeThresholds] = {}
    for reference in (cfg.thresholds_from or "").split(","):
        if not reference:
            continue
        thresholds = calibrated_thresholds(store, reference, cfg.thresholds,
                                           judge_model=cascade_name(cfg.cascade, cfg.judge_model),
                                           prompt_versions=PROMPT_VERSIONS)
        judge = thresholds.source.rpartition("/")[2]
        if judge not in cfg.judges:
            raise CalibrationError(f"thresholds_from {reference!r}: the run does not select judge {judge} "
                                   f"(judges: {', '.join(cfg.judges)})")
        if judge in calibrated:
            raise CalibrationError(f"thresholds_from names judge {judge} twice ({calibrated[judge].source} and "
                                   f"{thresholds.source})")
        calibrated[judge] = thresholds
        logger.info("run %s: judge %s verdicts at pass %s / borderline %s from calibration %s", cfg.run_id, judge,
                    thresholds.pass_, thresholds.borderline, thresholds.source)
    return cfg.with_thresholds_in_force(calibrated)
