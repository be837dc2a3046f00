"""The thresholds a run takes from a landed calibration (``thresholds_from``): read from the
``calibrations`` table, checked against the run's judges, before anything is paid for."""

from __future__ import annotations

import logging

import polars as pl

from evaluation import storage
from evaluation.calibration.spec import CalibrationError
from evaluation.contract import JudgeThresholds, RunConfig, Thresholds

logger = logging.getLogger(__name__)


#: Labelled rows of a judge's fit split below which a calibration's thresholds are not taken: a cut
#: chosen to maximise κ on fewer rows follows the sample more than the judge.
MIN_FIT_ROWS = 30


def calibrated_thresholds(store: storage.Store, reference: str, configured: Thresholds) -> JudgeThresholds:
    """The thresholds a calibration fitted for one judge (its ``score`` row). ``reference`` is
    ``<calibration id>/<judge>``, or the id alone when the calibration covers one judge.

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
    if configured.borderline >= passing:
        width = configured.pass_ - configured.borderline
        borderline = round(max(0.0, passing - width), 6)
    else:
        borderline = configured.borderline
    return JudgeThresholds.model_validate({"pass": passing, "borderline": borderline, "source": source})


def with_calibrated_thresholds(cfg: RunConfig, store: storage.Store) -> RunConfig:
    """``cfg`` with its ``thresholds_in_force``: for each judge its ``thresholds_from`` names, the
    thresholds that calibration fitted for it; for every other selected judge, the run's own."""
    calibrated: dict[str, JudgeThresholds] = {}
    for reference in (cfg.thresholds_from or "").split(","):
        if not reference:
            continue
        thresholds = calibrated_thresholds(store, reference, cfg.thresholds)
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
