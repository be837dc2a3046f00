"""The contract layer: the run's options and specs, every table's columns, versions, errors."""

#: The modules the layers above import (each by its path: none is loaded here).
__all__ = ["adapters", "calibration", "comparison", "config", "errors", "estimate", "judge_settings", "multiplicity", "normalise", "options", "redact", "reject_summary", "review", "review_queue", "schemas"]
