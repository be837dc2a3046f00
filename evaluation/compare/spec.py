"""What a model comparison is asked (:class:`ComparisonSpec`); the schemas of what it lands are
in :mod:`evaluation.stages.schemas`."""

from __future__ import annotations

from evaluation.contract import ComparisonError, ComparisonSpec
from evaluation.stages.schemas import METRICS_SCHEMA, VERDICTS_SCHEMA

__all__ = ["METRICS_SCHEMA", "VERDICTS_SCHEMA", "ComparisonError", "ComparisonSpec"]
