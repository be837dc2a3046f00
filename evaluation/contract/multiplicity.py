"""Multiplicity adjustments of p-values, shared by model comparisons (:mod:`evaluation.compare`)
and the daily report's flags (:mod:`evaluation.report.alerts`)."""

from __future__ import annotations

import numpy as np


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment (controls the family-wise error rate): the i-th smallest of m
    p-values becomes max over j <= i of min(1, (m - j + 1) * p_(j))."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    return adjusted


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg step-up adjustment (controls the false discovery rate): the i-th
    smallest of m p-values becomes min over j >= i of min(1, m * p_(j) / j)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    return adjusted


#: The multiplicity adjustments, by the name tables and pages show.
P_ADJUSTMENTS = {"holm": holm, "bh": benjamini_hochberg}


def adjust_p_values(p_values: np.ndarray, method: str = "holm") -> np.ndarray:
    """``p_values`` adjusted for their number with ``method`` (a key of :data:`P_ADJUSTMENTS`)."""
    if method not in P_ADJUSTMENTS:
        raise ValueError(f"unknown p-value adjustment {method!r}; one of {', '.join(P_ADJUSTMENTS)}")
    return P_ADJUSTMENTS[method](p_values) if np.size(p_values) else np.asarray(p_values, dtype=np.float64)
