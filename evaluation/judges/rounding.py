"""Python's ``round(x, n)`` as a Polars expression, digit for digit.

Python rounds half to even on the *binary* value of a float (``round(0.005, 2) == 0.01`` because
the double nearest 0.005 lies just above it), while Polars' ``round`` treats the decimal text as
exact (``0.0``). CONTRACT §2.1 asks table code for Python's digits, so this rounds exactly, as one
vectorised batch: each float is split into an integer mantissa and exponent (``x = m * 2**e``,
``numpy.frexp``), ``m * 10**n`` is formed exactly in 64-bit integers, shifted right by ``-e`` with
half-to-even on the bits shifted out, and the integer result is divided by ``10**n`` (one
correctly rounded IEEE division, as Python does). Valid for finite ``0 <= x < 2**52`` and
``n <= 3``, which covers every rounded value of the contract (scores and metrics in [0, 1]).
"""

from __future__ import annotations

import numpy as np
import polars as pl

_MAX_DECIMALS = 3
#: Below this, ``x * 10**3 < 0.5``: every rounding allowed here gives 0.
_NEGLIGIBLE = 2.0**-11


def round_half_even_binary(values: np.ndarray, decimals: int) -> np.ndarray:
    """``[round(v, decimals) for v in values]`` for a float64 array, vectorised; NaN stays NaN
    (``decimals`` checked by :func:`round_like_python`, its one caller)."""
    x = np.asarray(values, dtype=np.float64)
    if np.any(x < 0) or np.any(x >= 2.0**52):
        raise ValueError("round_half_even_binary takes values in [0, 2**52)")
    out = x * 0.0  # NaN stays NaN; a tiny or zero x gives a zero of its own sign, as round() does
    work = (x >= _NEGLIGIBLE) & ~np.isnan(x)
    if not work.any():
        return out
    fraction, exponent = np.frexp(x[work])  # x = fraction * 2**exponent, fraction in [0.5, 1)
    mantissa = (fraction * 2.0**53).astype(np.int64)  # exact: x = mantissa * 2**(exponent - 53)
    shift = (53 - exponent).astype(np.int64)  # in [1, 63] for x in [2**-11, 2**52)
    product = mantissa * np.int64(10**decimals)  # exact: mantissa < 2**53, 10**3 < 2**10
    quotient = product >> shift
    remainder = product & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    round_up = (remainder > half) | ((remainder == half) & (quotient % 2 == 1))
    out[work] = (quotient + round_up).astype(np.float64) / float(10**decimals)
    return out


def round_like_python(expr: pl.Expr, decimals: int) -> pl.Expr:
    """Round a non-negative Float64 expression to ``decimals`` places exactly as Python does."""
    if not 0 <= decimals <= _MAX_DECIMALS:
        raise ValueError(f"decimals must be in [0, {_MAX_DECIMALS}], got {decimals}")

    def _batch(series: pl.Series) -> pl.Series:
        rounded = round_half_even_binary(series.cast(pl.Float64).to_numpy(), decimals)
        return pl.Series(series.name, rounded, dtype=pl.Float64).fill_nan(None)

    return expr.cast(pl.Float64).map_batches(_batch, return_dtype=pl.Float64)
