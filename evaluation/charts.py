"""Inline SVG charts for the reports: no dependency, no script, no external fetch, deterministic.

Every builder returns one ``<svg>`` element as text, ready to paste into an HTML page (inline SVG
needs no ``xmlns`` there). The charts scale with the page (``viewBox``), carry an ``aria-label``
and a ``<title>`` (the accessible name), and every mark has a ``<title>`` child that browsers
show as a tooltip. All text is HTML-escaped, all coordinates are printed with one decimal, so the
same input gives the same bytes.

Colours: the Okabe–Ito palette, which stays distinguishable under the common colour-vision
deficiencies; series beyond the palette also change their dash pattern.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

#: Okabe–Ito colours (yellow left out: too pale on white), for series such as models.
PALETTE: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#999999")
#: Dash patterns for series past the palette's length.
DASHES: tuple[str, ...] = ("", "6 3", "2 3", "8 3 2 3")

#: Colours of judge statuses and verdicts (stacked bars), from the same palette.
OUTCOME_COLOURS: dict[str, str] = {
    "pass": "#009E73",
    "borderline": "#E69F00",
    "fail": "#D55E00",
    "parse_error": "#CC79A7",
    "judge_failed": "#56B4E9",
    "call_error": "#0072B2",
    "skipped": "#BBBBBB",
}

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
TEXT = "#222222"
MUTED = "#555555"
GRID = "#E4E4E4"
AXIS = "#888888"

Formatter = Callable[[float], str]


def esc(text: object) -> str:
    """HTML/XML-escaped text (quotes too, so it is safe in attributes)."""
    return html.escape(str(text), quote=True)


def fmt_percent(value: float) -> str:
    """``0.825`` → ``82.5%`` (whole percent when exact)."""
    pct = value * 100
    return f"{pct:.0f}%" if abs(pct - round(pct)) < 1e-9 else f"{pct:.1f}%"


def fmt_decimal(value: float) -> str:
    """Up to two decimals, trailing zeros dropped (axis ticks)."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fmt_count(value: float) -> str:
    """A whole number with thousands separators."""
    return f"{value:,.0f}"


def colour(index: int) -> str:
    """The palette colour of the ``index``-th series."""
    return PALETTE[index % len(PALETTE)]


def dash(index: int) -> str:
    """The dash pattern of the ``index``-th series (solid for the first palette round)."""
    return DASHES[(index // len(PALETTE)) % len(DASHES)]


def _n(value: float) -> str:
    """A coordinate with one decimal, never ``-0.0``."""
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def _text_width(text: str, size: float = 11.0) -> float:
    """A rough width of ``text`` in pixels (layout only; no font metrics available)."""
    return len(text) * size * 0.56


def _ink(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` (a ``#RRGGBB`` colour)."""
    r, g, b = (int(fill[i : i + 2], 16) / 255 for i in (1, 3, 5))
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#000000" if luminance > 0.45 else "#FFFFFF"


def nice_ticks(low: float, high: float, count: int = 5, *, integer: bool = False) -> list[float]:
    """About ``count`` round tick values covering ``[low, high]`` (steps of 1, 2, 2.5 or 5 × 10^k;
    whole steps only when ``integer``)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0]
    if high <= low:
        high = low + 1.0
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw - 1e-12)
    if integer:
        step = max(1.0, float(math.ceil(step)))
    start = math.floor(low / step + 1e-9) * step
    ticks = []
    value = start
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high - 1e-9:
        ticks.append(round(value, 10))
    return ticks


#: Height of the visible title line at the top of every chart.
TITLE_H = 24.0


def _open(width: float, height: float, title: str, description: str = "") -> list[str]:
    """The ``<svg>`` start: accessible name and description, and the title shown on top."""
    label = title if not description else f"{title}. {description}"
    parts = [
        f'<svg class="chart" viewBox="0 0 {_n(width)} {_n(height)}" width="{_n(width)}" height="{_n(height)}"'
        f' role="img" aria-label="{esc(label)}" font-family="{esc(FONT)}" font-size="11">',
        f"<title>{esc(title)}</title>",
    ]
    if description:
        parts.append(f"<desc>{esc(description)}</desc>")
    parts.append(f'<text x="4" y="16" font-size="13" font-weight="600" fill="{TEXT}" aria-hidden="true">{esc(title)}</text>')
    return parts


def _legend(items: Sequence[tuple[str, str, str]], x: float, y: float, width: float, kind: str = "line") -> tuple[list[str], float]:
    """Legend entries ``(name, colour, dash)`` laid out in rows from ``(x, y)``; returns the marks
    and the height used."""
    parts: list[str] = ['<g class="legend">']
    cx, cy = x, y
    for name, fill, pattern in items:
        entry = 22 + _text_width(name) + 12
        if cx + entry > x + width and cx > x:
            cx, cy = x, cy + 16
        if kind == "line":
            dash_attr = f' stroke-dasharray="{pattern}"' if pattern else ""
            parts.append(
                f'<line x1="{_n(cx)}" y1="{_n(cy + 6)}" x2="{_n(cx + 16)}" y2="{_n(cy + 6)}" stroke="{fill}"'
                f' stroke-width="2.5"{dash_attr}/>'
            )
        else:
            parts.append(f'<rect x="{_n(cx + 3)}" y="{_n(cy + 1)}" width="10" height="10" fill="{fill}"/>')
        parts.append(f'<text x="{_n(cx + 21)}" y="{_n(cy + 10)}" fill="{TEXT}">{esc(name)}</text>')
        cx += entry
    parts.append("</g>")
    return parts, (cy - y) + 18 if items else 0.0


# --------------------------------------------------------------------------------------------
# Line chart (trends over days)


@dataclass(frozen=True)
class LineSeries:
    """One line: a value per x label (``None`` where there is no data: the line breaks there),
    with an optional band (``(low, high)`` per x label, e.g. a 95% interval)."""

    name: str
    values: Sequence[float | None]
    band: Sequence[tuple[float, float] | None] | None = None
    colour: str | None = None


def line_chart(
    x_labels: Sequence[str],
    series: Sequence[LineSeries],
    *,
    title: str,
    y_label: str,
    y_range: tuple[float, float] | None = (0.0, 1.0),
    value_format: Formatter = fmt_decimal,
    tick_format: Formatter | None = None,
    band_label: str = "95% interval",
    width: float = 560,
    height: float = 250,
) -> str:
    """Several series over shared x labels (days), with gaps at ``None`` and optional shaded bands."""
    tick_format = tick_format or value_format
    height += TITLE_H
    fills = [s.colour or colour(i) for i, s in enumerate(series)]
    legend, legend_h = _legend([(s.name, fills[i], dash(i)) for i, s in enumerate(series)], 56, 8 + TITLE_H, width - 64)
    top, left, right, bottom = 14 + TITLE_H + legend_h, 56.0, 24.0, 40.0
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for s in series for v in s.values if v is not None]
    values += [b for s in series for pair in (s.band or []) if pair is not None for b in pair]
    if y_range is None:
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        ticks = nice_ticks(lo, hi)
        y_lo, y_hi = ticks[0], ticks[-1]
    else:
        y_lo, y_hi = y_range
        ticks = nice_ticks(y_lo, y_hi)
        ticks = [t for t in ticks if y_lo - 1e-9 <= t <= y_hi + 1e-9]
    span = (y_hi - y_lo) or 1.0

    def px(i: int) -> float:
        return left + (plot_w / 2 if len(x_labels) == 1 else i * plot_w / (len(x_labels) - 1))

    def py(v: float) -> float:
        return top + plot_h - (min(max(v, y_lo), y_hi) - y_lo) / span * plot_h

    parts = _open(width, height, title, f"{y_label} by day for {len(series)} series")
    parts += legend
    for t in ticks:  # grid and y ticks
        parts.append(f'<line x1="{_n(left)}" y1="{_n(py(t))}" x2="{_n(left + plot_w)}" y2="{_n(py(t))}" stroke="{GRID}"/>')
        parts.append(f'<text x="{_n(left - 6)}" y="{_n(py(t) + 4)}" text-anchor="end" fill="{MUTED}">{esc(tick_format(t))}</text>')
    step = max(1, math.ceil(len(x_labels) / 8))
    for i, label in enumerate(x_labels):  # x ticks, the last day always labelled
        if (len(x_labels) - 1 - i) % step == 0:
            parts.append(f'<line x1="{_n(px(i))}" y1="{_n(top + plot_h)}" x2="{_n(px(i))}" y2="{_n(top + plot_h + 4)}" stroke="{AXIS}"/>')
            parts.append(f'<text x="{_n(px(i))}" y="{_n(top + plot_h + 16)}" text-anchor="middle" fill="{MUTED}">{esc(label)}</text>')
    parts.append(f'<line x1="{_n(left)}" y1="{_n(top + plot_h)}" x2="{_n(left + plot_w)}" y2="{_n(top + plot_h)}" stroke="{AXIS}"/>')
    parts.append(
        f'<text x="14" y="{_n(top + plot_h / 2)}" text-anchor="middle" fill="{MUTED}"'
        f' transform="rotate(-90 14 {_n(top + plot_h / 2)})">{esc(y_label)}</text>'
    )
    for index, s in enumerate(series):
        fill = fills[index]
        if s.band is not None:  # one polygon per run of consecutive days with a band
            bands = [s.band[i] if i < len(s.band) else None for i in range(len(x_labels))] + [None]
            run: list[tuple[float, float, float]] = []  # (x, low, high)
            for i, pair in enumerate(bands):
                if pair is not None:
                    run.append((px(i), pair[0], pair[1]))
                    continue
                if run:
                    if len(run) == 1:  # a lone day: a narrow box
                        x, low, high = run[0]
                        run = [(x - 3, low, high), (x + 3, low, high)]
                    upper = [f"{_n(x)},{_n(py(high))}" for x, _, high in run]
                    lower = [f"{_n(x)},{_n(py(low))}" for x, low, _ in reversed(run)]
                    parts.append(
                        f'<polygon points="{" ".join(upper + lower)}" fill="{fill}" fill-opacity="0.13" stroke="none">'
                        f"<title>{esc(s.name)}: {esc(band_label)}</title></polygon>"
                    )
                    run = []
        segment: list[str] = []
        paths: list[str] = []
        for i, v in enumerate(s.values):
            if v is None:
                if len(segment) > 1:
                    paths.append(" ".join(segment))
                segment = []
                continue
            segment.append(("M" if not segment else "L") + f"{_n(px(i))},{_n(py(v))}")
        if len(segment) > 1:
            paths.append(" ".join(segment))
        pattern = dash(index)
        dash_attr = f' stroke-dasharray="{pattern}"' if pattern else ""
        for d in paths:
            parts.append(f'<path d="{d}" fill="none" stroke="{fill}" stroke-width="2"{dash_attr}/>')
        for i, v in enumerate(s.values):
            if v is None:
                continue
            tip = f"{s.name} · {x_labels[i]}: {value_format(v)}"
            pair = s.band[i] if s.band is not None and i < len(s.band) else None
            if pair is not None:
                tip += f" ({band_label} {value_format(pair[0])} – {value_format(pair[1])})"
            parts.append(
                f'<circle cx="{_n(px(i))}" cy="{_n(py(v))}" r="3" fill="{fill}" stroke="#FFFFFF" stroke-width="1">'
                f"<title>{esc(tip)}</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# Horizontal bars, stacked or not


@dataclass(frozen=True)
class Segment:
    """One part of a stacked bar (a legend entry)."""

    name: str
    colour: str


@dataclass(frozen=True)
class BarRow:
    """One bar: a label and a value per segment (counts)."""

    label: str
    values: Sequence[float]


def stacked_bar_chart(
    rows: Sequence[BarRow],
    segments: Sequence[Segment],
    *,
    title: str,
    normalize: bool = True,
    unit: str = "rows",
    width: float = 760,
    bar_height: float = 20,
) -> str:
    """Horizontal stacked bars, one per row; ``normalize`` shows shares of each row's total
    (with the total printed at the bar's end), otherwise raw values on a shared axis."""
    show_legend = len(segments) > 1
    legend, legend_h = _legend([(s.name, s.colour, "") for s in segments], 8, 8 + TITLE_H, width - 16, kind="box") if show_legend else ([], 0.0)
    label_w = min(max((_text_width(r.label) for r in rows), default=40) + 14, 260)
    total_w = 64.0
    top = 14 + TITLE_H + legend_h
    left, right = label_w, total_w
    plot_w = width - left - right
    gap = 8.0
    height = top + len(rows) * (bar_height + gap) + 28
    totals = [sum(r.values) for r in rows]
    scale_max = 1.0 if normalize else (max(totals, default=0) or 1.0)
    ticks = nice_ticks(0, scale_max, integer=all(float(v).is_integer() for r in rows for v in r.values))
    if normalize:
        ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
    scale_max = ticks[-1] or 1.0
    axis_y = top + len(rows) * (bar_height + gap)
    description = f"{len(rows)} bars" + (f" split into {', '.join(s.name for s in segments)}" if show_legend else "")
    parts = _open(width, height, title, description)
    parts += legend
    for t in ticks:
        x = left + t / scale_max * plot_w
        parts.append(f'<line x1="{_n(x)}" y1="{_n(top - 4)}" x2="{_n(x)}" y2="{_n(axis_y)}" stroke="{GRID}"/>')
        label = fmt_percent(t) if normalize else fmt_count(t) if float(t).is_integer() else fmt_decimal(t)
        parts.append(f'<text x="{_n(x)}" y="{_n(axis_y + 14)}" text-anchor="middle" fill="{MUTED}">{esc(label)}</text>')
    for index, (row, total) in enumerate(zip(rows, totals, strict=True)):
        y = top + index * (bar_height + gap)
        parts.append(
            f'<text x="{_n(left - 8)}" y="{_n(y + bar_height / 2 + 4)}" text-anchor="end" fill="{TEXT}">{esc(row.label)}</text>'
        )
        x = left
        for segment, value in zip(segments, row.values, strict=True):
            if value <= 0:
                continue
            share = value / total if total else 0.0
            w = (share if normalize else value / scale_max) * plot_w
            tip = f"{row.label} — {segment.name}: {fmt_count(value) if float(value).is_integer() else fmt_decimal(value)} {unit}"
            if normalize or len(segments) > 1:
                tip += f" ({fmt_percent(share)})"
            parts.append(
                f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(bar_height)}" fill="{segment.colour}">'
                f"<title>{esc(tip)}</title></rect>"
            )
            inner = fmt_percent(share) if normalize else (fmt_count(value) if float(value).is_integer() else fmt_decimal(value))
            if w >= _text_width(inner, 10) + 6:
                parts.append(
                    f'<text x="{_n(x + w / 2)}" y="{_n(y + bar_height / 2 + 3.5)}" text-anchor="middle" font-size="10"'
                    f' fill="{_ink(segment.colour)}" pointer-events="none">{esc(inner)}</text>'
                )
            x += w
        end = f"n={fmt_count(total)}" if normalize else ""
        if end:
            parts.append(f'<text x="{_n(left + plot_w + 6)}" y="{_n(y + bar_height / 2 + 4)}" fill="{MUTED}">{esc(end)}</text>')
    parts.append(f'<line x1="{_n(left)}" y1="{_n(top - 4)}" x2="{_n(left)}" y2="{_n(axis_y)}" stroke="{AXIS}"/>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(labels: Sequence[str], values: Sequence[float], *, title: str, unit: str = "rows",
              bar_colour: str = PALETTE[0], width: float = 760) -> str:
    """Plain horizontal bars of raw values (e.g. rejects by rule)."""
    rows = [BarRow(label, [value]) for label, value in zip(labels, values, strict=True)]
    return stacked_bar_chart(rows, [Segment(unit, bar_colour)], title=title, normalize=False, unit=unit, width=width)


# --------------------------------------------------------------------------------------------
# Interval chart (dot + whisker)


@dataclass(frozen=True)
class Interval:
    """One row: an estimate with its interval, and an optional reference value (e.g. the
    trailing 7-day mean); ``flagged`` marks a reference outside the interval."""

    label: str
    value: float | None
    low: float | None
    high: float | None
    reference: float | None = None
    flagged: bool = False
    colour: str | None = None


def interval_chart(
    rows: Sequence[Interval],
    *,
    title: str,
    x_label: str,
    value_format: Formatter = fmt_decimal,
    x_range: tuple[float, float] | None = None,
    reference_label: str = "trailing 7-day mean",
    width: float = 460,
) -> str:
    """Dots with 95% whiskers per row; a hollow diamond marks each row's reference value."""
    label_w = min(max((_text_width(r.label) for r in rows), default=40) + 14, 200)
    has_reference = any(r.reference is not None for r in rows)
    has_flag = any(r.flagged and r.reference is not None for r in rows)
    entries = [("estimate, 95% interval", "whisker")]
    if has_reference:
        entries.append((reference_label, "reference"))
    if has_flag:
        entries.append((f"{reference_label} outside the interval", "flagged"))
    legend_rows: list[list[tuple[float, str, str]]] = [[]]
    lx = 8.0
    for text, kind in entries:  # lay the legend out in rows that fit the width
        entry = 24 + _text_width(text) + 16
        if lx + entry > width - 8 and legend_rows[-1]:
            legend_rows.append([])
            lx = 8.0
        legend_rows[-1].append((lx, text, kind))
        lx += entry
    top = TITLE_H + 16 * len(legend_rows) + 16
    left, right = label_w, 20.0
    plot_w = width - left - right
    row_h = 24.0
    height = top + len(rows) * row_h + 40
    if x_range is None:
        values = [v for r in rows for v in (r.value, r.low, r.high, r.reference) if v is not None]
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        pad = max((hi - lo) * 0.1, 0.02)
        ticks = nice_ticks(max(lo - pad, 0.0) if lo >= 0 else lo - pad, min(hi + pad, 1.0) if hi <= 1 else hi + pad)
    else:
        ticks = nice_ticks(*x_range)
    x_lo, x_hi = ticks[0], ticks[-1]
    span = (x_hi - x_lo) or 1.0

    def px(v: float) -> float:
        return left + (min(max(v, x_lo), x_hi) - x_lo) / span * plot_w

    axis_y = top + len(rows) * row_h
    parts = _open(width, height, title, f"{x_label} with 95% intervals for {len(rows)} rows")
    parts.append('<g class="legend">')
    for row_index, legend_row in enumerate(legend_rows):
        cy = TITLE_H + 8 + row_index * 16
        for lx, text, kind in legend_row:
            if kind == "whisker":
                parts.append(f'<line x1="{_n(lx)}" y1="{_n(cy)}" x2="{_n(lx + 18)}" y2="{_n(cy)}" stroke="{TEXT}" stroke-width="1.5"/>')
                parts.append(f'<circle cx="{_n(lx + 9)}" cy="{_n(cy)}" r="4" fill="{TEXT}"/>')
            else:
                stroke, sw = ("#D55E00", "2") if kind == "flagged" else (MUTED, "1.5")
                parts.append(
                    f'<path d="M{_n(lx + 9)},{_n(cy - 5)} L{_n(lx + 14)},{_n(cy)} L{_n(lx + 9)},{_n(cy + 5)} L{_n(lx + 4)},{_n(cy)} Z"'
                    f' fill="#FFFFFF" stroke="{stroke}" stroke-width="{sw}"/>'
                )
            parts.append(f'<text x="{_n(lx + 24)}" y="{_n(cy + 4)}" fill="{TEXT}">{esc(text)}</text>')
    parts.append("</g>")
    for t in ticks:
        parts.append(f'<line x1="{_n(px(t))}" y1="{_n(top - 6)}" x2="{_n(px(t))}" y2="{_n(axis_y)}" stroke="{GRID}"/>')
        parts.append(f'<text x="{_n(px(t))}" y="{_n(axis_y + 14)}" text-anchor="middle" fill="{MUTED}">{esc(value_format(t))}</text>')
    parts.append(f'<text x="{_n(left + plot_w / 2)}" y="{_n(axis_y + 32)}" text-anchor="middle" fill="{MUTED}">{esc(x_label)}</text>')
    for index, row in enumerate(rows):
        y = top + index * row_h + row_h / 2
        weight = ' font-weight="700"' if row.flagged else ""
        parts.append(f'<text x="{_n(left - 8)}" y="{_n(y + 4)}" text-anchor="end" fill="{TEXT}"{weight}>{esc(row.label)}</text>')
        if row.value is None:
            parts.append(f'<text x="{_n(left + 4)}" y="{_n(y + 4)}" fill="{MUTED}">no data</text>')
            continue
        fill = row.colour or colour(index)
        tip = f"{row.label}: {value_format(row.value)}"
        if row.low is not None and row.high is not None:
            tip += f" (95% interval {value_format(row.low)} – {value_format(row.high)})"
            x1, x2 = px(row.low), px(row.high)
            parts.append(f'<line x1="{_n(x1)}" y1="{_n(y)}" x2="{_n(x2)}" y2="{_n(y)}" stroke="{fill}" stroke-width="2"/>')
            for x in (x1, x2):
                parts.append(f'<line x1="{_n(x)}" y1="{_n(y - 5)}" x2="{_n(x)}" y2="{_n(y + 5)}" stroke="{fill}" stroke-width="2"/>')
        if row.reference is not None:
            rx = px(row.reference)
            stroke, sw = ("#D55E00", "2") if row.flagged else (MUTED, "1.5")
            flag_note = ", outside the interval" if row.flagged else ""
            parts.append(
                f'<path d="M{_n(rx)},{_n(y - 6)} L{_n(rx + 5)},{_n(y)} L{_n(rx)},{_n(y + 6)} L{_n(rx - 5)},{_n(y)} Z"'
                f' fill="#FFFFFF" fill-opacity="0.6" stroke="{stroke}" stroke-width="{sw}">'
                f"<title>{esc(f'{row.label}: {reference_label} {value_format(row.reference)}{flag_note}')}</title></path>"
            )
        parts.append(
            f'<circle cx="{_n(px(row.value))}" cy="{_n(y)}" r="4.5" fill="{fill}" stroke="#FFFFFF" stroke-width="1">'
            f"<title>{esc(tip)}</title></circle>"
        )
    parts.append(f'<line x1="{_n(left)}" y1="{_n(axis_y)}" x2="{_n(left + plot_w)}" y2="{_n(axis_y)}" stroke="{AXIS}"/>')
    parts.append("</svg>")
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# Histogram


def bin_expr(value: pl.Expr, *, low: float = 0.0, high: float = 1.0, bins: int = 10) -> pl.Expr:
    """The bin of ``value`` among ``bins`` equal bins over ``[low, high]``, as a Polars expression
    (counted per bin in a query): each bin holds its lower edge, the last one also ``high``; values
    outside go to the first or last bin. Edges are decided on the value rounded to 9 decimals of a
    bin, so that 0.3 falls in [0.3, 0.4)."""
    position = ((value - low) / (high - low) * bins).round(9)
    return position.floor().clip(0, bins - 1).cast(pl.Int64)


@dataclass(frozen=True)
class HistogramSeries:
    """One group's counts per bin."""

    name: str
    counts: Sequence[int]
    colour: str | None = None


def histogram(
    series: Sequence[HistogramSeries],
    *,
    title: str,
    x_label: str,
    low: float = 0.0,
    high: float = 1.0,
    width: float = 380,
    height: float = 220,
) -> str:
    """Histogram of equal bins over ``[low, high]``; several series are drawn as grouped bars
    and scaled to their share of the series (so groups of different sizes compare)."""
    bins = len(series[0].counts) if series else 10
    height += TITLE_H
    fills = [s.colour or colour(i) for i, s in enumerate(series)]
    legend, legend_h = _legend([(f"{s.name} ({sum(s.counts)})", fills[i], "") for i, s in enumerate(series)], 40, 8 + TITLE_H,
                               width - 48, kind="box")
    top, left, right, bottom = 14 + TITLE_H + legend_h, 48.0, 12.0, 42.0
    plot_w, plot_h = width - left - right, height - top - bottom
    shares = [[c / (sum(s.counts) or 1) for c in s.counts] for s in series]
    peak = max((v for row in shares for v in row), default=0.0) or 1.0
    ticks = nice_ticks(0.0, peak, 4)
    y_hi = ticks[-1] or 1.0

    def py(v: float) -> float:
        return top + plot_h - v / y_hi * plot_h

    edges = [low + (high - low) * i / bins for i in range(bins + 1)]
    bin_w = plot_w / bins
    bar_w = max((bin_w - 2) / max(len(series), 1), 1.0)
    total = sum(sum(s.counts) for s in series)
    parts = _open(width, height, title, f"distribution of {total} values in {bins} bins from {fmt_decimal(low)} to {fmt_decimal(high)}")
    parts += legend
    for t in ticks:
        parts.append(f'<line x1="{_n(left)}" y1="{_n(py(t))}" x2="{_n(left + plot_w)}" y2="{_n(py(t))}" stroke="{GRID}"/>')
        parts.append(f'<text x="{_n(left - 6)}" y="{_n(py(t) + 4)}" text-anchor="end" fill="{MUTED}">{esc(fmt_percent(t))}</text>')
    for b in range(bins):
        x0 = left + b * bin_w + 1
        closing = "]" if b == bins - 1 else ")"
        for index, s in enumerate(series):
            count = s.counts[b]
            if count == 0:
                continue
            share = shares[index][b]
            y = py(share)
            tip = f"{s.name}: {count} in [{fmt_decimal(edges[b])}, {fmt_decimal(edges[b + 1])}{closing} ({fmt_percent(share)} of {sum(s.counts)})"
            parts.append(
                f'<rect x="{_n(x0 + index * bar_w)}" y="{_n(y)}" width="{_n(bar_w)}" height="{_n(top + plot_h - y)}"'
                f' fill="{fills[index]}"><title>{esc(tip)}</title></rect>'
            )
    label_every = 2 if bins > 6 else 1
    for i, edge in enumerate(edges):
        x = left + i * bin_w
        parts.append(f'<line x1="{_n(x)}" y1="{_n(top + plot_h)}" x2="{_n(x)}" y2="{_n(top + plot_h + 4)}" stroke="{AXIS}"/>')
        if i % label_every == 0 or i == bins:
            parts.append(f'<text x="{_n(x)}" y="{_n(top + plot_h + 16)}" text-anchor="middle" fill="{MUTED}">{esc(fmt_decimal(edge))}</text>')
    parts.append(f'<line x1="{_n(left)}" y1="{_n(top + plot_h)}" x2="{_n(left + plot_w)}" y2="{_n(top + plot_h)}" stroke="{AXIS}"/>')
    parts.append(f'<text x="{_n(left + plot_w / 2)}" y="{_n(height - 6)}" text-anchor="middle" fill="{MUTED}">{esc(x_label)}</text>')
    parts.append(
        f'<text x="12" y="{_n(top + plot_h / 2)}" text-anchor="middle" fill="{MUTED}"'
        f' transform="rotate(-90 12 {_n(top + plot_h / 2)})">share of rows</text>'
    )
    parts.append("</svg>")
    return "".join(parts)
