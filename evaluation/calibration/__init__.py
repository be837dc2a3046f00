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

The names below load on first use, so that the DAG file (which needs only the spec) and the CLI's
parser stay light.
"""

from __future__ import annotations

from evaluation._lazy import lazy_exports

_EXPORTS = {
    "CalibrationError": "evaluation.calibration.spec",
    "CalibrationSpec": "evaluation.calibration.spec",
    "CALIBRATIONS_SCHEMA": "evaluation.stages.schemas",
    "calibration_rows": "evaluation.calibration.compute",
    "label_problems": "evaluation.calibration.golden",
    "read_golden_set": "evaluation.calibration.golden",
    "calibrate": "evaluation.calibration.run",
    "calibration_id": "evaluation.calibration.run",
    "judge_golden_set": "evaluation.calibration.run",
    "run_calibration": "evaluation.calibration.run",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
