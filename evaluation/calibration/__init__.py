"""Judge calibration: how far do the judges agree with people?

A *golden set* (:mod:`evaluation.calibration.golden`, docs/golden-sets.md) is a folder of input
records (CONTRACT §1) that carry human ``labels``: a binary ``faithful``, an ordinal ``rating``,
per-metric ``scores`` in [0, 1] and/or an expected ``verdict``. A calibration judges the set
with a judge model through the daily stages, client and ledger (a re-run pays nothing), then
measures per judge and metric how far its values and verdicts agree with the labels, and the
thresholds that would agree best (:mod:`evaluation.calibration.compute` lists the figures; pure
statistics in :mod:`evaluation.calibration.metrics`).

It lands ``calibrations/calibration_id=<id>/calibration.parquet`` (the ``calibrations`` table:
one row per set, judge, judge model, prompt version and metric, :data:`CALIBRATIONS_SCHEMA`),
``report.html`` (ROC curve per judge) and the evidence beside them (:mod:`evaluation.calibration.run`).
The ``judge_calibration`` DAG and ``python -m evaluation calibrate`` run it.

This package re-exports only the spec, which a DAG file imports at parse time (running this
module first), so nothing heavy; the job and its parts are imported from their modules:
:func:`evaluation.calibration.run.run_calibration` (and ``calibrate``, ``calibration_id``,
``judge_golden_set``), :mod:`evaluation.calibration.golden` (``read_golden_set``,
``label_problems``), :mod:`evaluation.calibration.compute` (``calibration_rows``) and the table's
schema, :data:`evaluation.contract.schemas.CALIBRATIONS_SCHEMA`.
"""

from evaluation.contract.calibration import CalibrationError, CalibrationSpec

__all__ = ["CalibrationError", "CalibrationSpec"]
