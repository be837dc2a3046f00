"""Model comparisons: is one assistant version better than another, and by how much?

A comparison takes the ``ok`` judgements of two or more models over a date range and, per judge
and metric, estimates each model's mean with a 95% bootstrap interval and its difference from a
baseline model with a 95% bootstrap interval and a permutation p-value. It lands under
``comparisons/comparison_id=<id>/`` (:func:`evaluation.storage.comparison_key`):

* ``metrics.parquet`` — one row per (judge, metric, model): see :data:`METRICS_SCHEMA`;
* ``verdicts.parquet`` — the verdict mix per (judge, model) and its shift from the baseline;
* ``spec.json`` — the :class:`ComparisonSpec` and how the rows were obtained;
* ``report.html`` — a self-contained page (inline CSS and SVG, nothing fetched);
* when re-judging, also ``evaluations.parquet`` and ``judge_calls.parquet`` of the re-judged
  sample (the ``evaluations`` columns).

Two sources of judgements:

* without ``judge_model``: the scores already landed in ``evaluations`` for the date range, read
  in place (the range's partitions and the compared columns only);
* with ``judge_model``: a seeded sample of each model's valid records, read again from the raw
  input (ingest + the validation suite), judged by that model through the pipeline's own chunk
  stage (same prompts, client, ledger of paid calls and scoring rules).

Records are matched across models on their ``question_key``
(:func:`evaluation.contract.config.question_key`), landed with ``evaluations`` (for days landed
before it was, derived from the prompt kept in ``judge_calls``). The tests, paired
(:func:`paired_test`) or unpaired (:func:`unpaired_test`), the sample drawn by question
(:func:`sample_records`), the family of all a comparison's deltas adjusted by :func:`holm` or
:func:`benjamini_hochberg` with enough permutations
(:func:`evaluation.compare.compute.permutation_count`), and each delta's effect size: docs/tables.md,
"`comparisons`".

:mod:`evaluation.compare.compute` works the numbers out (with the statistics of
:mod:`evaluation.compare.stats`) and lands them; :mod:`evaluation.compare.render` draws the page.

Everything random draws from a numpy ``Generator`` seeded by ``(seed, judge, metric, model)``,
so the same spec over the same data gives identical tables whatever order they are computed in.
"""

from evaluation.compare.compute import (
    compare_metrics,
    judge_sample,
    paired_questions,
    run_comparison,
    sample_records,
    sampled_valid_records,
)
from evaluation.compare.stats import ALPHA, bootstrap_means, paired_test, rng_for, unpaired_test
from evaluation.contract.comparison import ComparisonError, ComparisonSpec
from evaluation.contract.config import question_key
from evaluation.contract.multiplicity import adjust_p_values, benjamini_hochberg, holm
from evaluation.contract.schemas import METRICS_SCHEMA, VERDICTS_SCHEMA

__all__ = ["ALPHA", "METRICS_SCHEMA", "VERDICTS_SCHEMA", "ComparisonError", "ComparisonSpec", "adjust_p_values",
           "benjamini_hochberg", "bootstrap_means", "compare_metrics", "holm", "judge_sample", "paired_questions",
           "paired_test", "question_key", "rng_for", "run_comparison", "sample_records", "sampled_valid_records",
           "unpaired_test"]
