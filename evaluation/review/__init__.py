"""People in the loop: the review queue, its Label Studio round trip and export, the
``human_labels`` table, and rates corrected by people's labels (docs/people.md).

Light names only (a DAG file imports this package at parse time); the jobs are imported from their
modules: :mod:`evaluation.review.queue` (the draw), :mod:`evaluation.review.job` (queue a day,
export, import), :mod:`evaluation.review.labels` (the table), :mod:`evaluation.review.labelstudio`
(the Label Studio client), :mod:`evaluation.review.estimate` (prediction-powered rates).
"""

from evaluation.review.spec import QUESTIONS, STRATA, TARGETED_STRATA, ReviewError, ReviewSpec

__all__ = ["QUESTIONS", "STRATA", "TARGETED_STRATA", "ReviewError", "ReviewSpec"]
