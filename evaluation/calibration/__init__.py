"""Judge calibration: how far do the judges agree with people?

A *golden set* (:mod:`evaluation.calibration.golden`, docs/golden-sets.md) is a folder of input
records (CONTRACT §1) that carry human ``labels``: a binary ``faithful``, an ordinal ``rating``,
per-metric ``scores`` in [0, 1] and/or an expected ``verdict``. A calibration judges the set
with a judge model through the daily stages, client and ledger (a re-run pays nothing), then
measures per judge and metric how far its values and verdicts agree with the labels, and the
thresholds that would agree best (:mod:`evaluation.calibration.compute` lists the figures; pure
statistics in :mod:`evaluation.calibration.metrics`).

It lands under ``calibrations/calibration_id=<id>/`` (:mod:`evaluation.calibration.run`); the
``judge_calibration`` DAG and ``python -m evaluation calibrate`` run it.

This package re-exports only the spec, which a DAG file imports at parse time, so nothing heavy;
the job and its parts are imported from their modules (:func:`evaluation.calibration.run.run_calibration`).
"""

from evaluation.contract.calibration import CalibrationError, CalibrationSpec

__all__ = ["CalibrationError", "CalibrationSpec"]
