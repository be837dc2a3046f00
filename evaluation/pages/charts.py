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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

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
_T = TypeVar("_T")


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
    return f"{value:,.0f}"


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def dash(index: int) -> str:
    """The dash pattern of the ``index``-th series (solid for the first palette round)."""
    return DASHES[(index // len(PALETTE)) % len(DASHES)]


def _n(value: float) -> str:
    """A coordinate with one decimal, never ``-0.0``."""
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def _text_width(text: str, size: float = 11.0) -> float:
    """A generous width of ``text`` in pixels (layout only; no font metrics available: wide enough
    for the sans-serif fonts browsers fall back to, DejaVu Sans among them)."""
    return len(text) * size * 0.62


#: The largest share of a chart's width its row labels may take.
LABEL_SHARE = 0.45


def _label_room(labels: Sequence[str], width: float) -> float:
    """The width of a chart's row-label column: its longest label's, at most :data:`LABEL_SHARE` of the chart."""
    return min(max((_text_width(label) for label in labels), default=40) + 14, width * LABEL_SHARE)


def _row_label(x: float, y: float, text: str, room: float, extra: str = "") -> str:
    """A row label ending at ``x`` within ``room`` pixels: cut with an ellipsis when longer (the
    whole label in its tooltip), so no label runs out of the chart."""
    if _text_width(text) <= room:
        return _text(x, y, text, anchor="end", fill=TEXT, extra=extra)
    keep = max(1, int(room / (11.0 * 0.62)) - 1)
    return (f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="end" fill="{TEXT}"{extra}>{esc(text[:keep])}…'
            f"<title>{esc(text)}</title></text>")


def _ink(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` (a ``#RRGGBB`` colour)."""
    r, g, b = (int(fill[i : i + 2], 16) / 255 for i in (1, 3, 5))
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#000000" if luminance > 0.45 else "#FFFFFF"


def _dash_attr(pattern: str) -> str:
    return f' stroke-dasharray="{pattern}"' if pattern else ""


def _line(x1: float, y1: float, x2: float, y2: float, stroke: str, extra: str = "") -> str:
    return f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" stroke="{stroke}"{extra}/>'


def _text(x: float, y: float, text: str, *, anchor: str = "", fill: str = MUTED, extra: str = "") -> str:
    anchor_attr = f' text-anchor="{anchor}"' if anchor else ""
    return f'<text x="{_n(x)}" y="{_n(y)}"{anchor_attr} fill="{fill}"{extra}>{esc(text)}</text>'


def _diamond(x: float, y: float, half_width: float, half_height: float) -> str:
    """The path of a diamond centred on ``(x, y)``."""
    return (f"M{_n(x)},{_n(y - half_height)} L{_n(x + half_width)},{_n(y)} L{_n(x)},{_n(y + half_height)}"
            f" L{_n(x - half_width)},{_n(y)} Z")


def _reference_stroke(flagged: bool) -> str:
    """The outline of a reference diamond: vermillion and bolder when it lies outside the interval."""
    return ' stroke="#D55E00" stroke-width="2"' if flagged else f' stroke="{MUTED}" stroke-width="1.5"'


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
    ticks = []
    value = math.floor(low / step + 1e-9) * step
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high - 1e-9:
        ticks.append(round(value, 10))
    return ticks


#: Height of the visible title line at the top of every chart.
TITLE_H = 24.0


def _key(kind: str, x: float, y: float, fill: str, pattern: str) -> str:
    """The mark of a legend entry whose row starts at ``y``: a (dashed) ``line``, a ``box``, an
    estimate with its ``whisker``, or a ``reference`` diamond (``flagged``: outside the interval)."""
    if kind == "line":
        return _line(x, y + 6, x + 16, y + 6, fill, f' stroke-width="2.5"{_dash_attr(pattern)}')
    if kind == "box":
        return f'<rect x="{_n(x + 3)}" y="{_n(y + 1)}" width="10" height="10" fill="{fill}"/>'
    if kind == "whisker":
        whisker = _line(x, y + 6, x + 18, y + 6, TEXT, ' stroke-width="1.5"')
        return whisker + f'<circle cx="{_n(x + 9)}" cy="{_n(y + 6)}" r="4" fill="{TEXT}"/>'
    return f'<path d="{_diamond(x + 9, y + 6, 5, 5)}" fill="#FFFFFF"{_reference_stroke(kind == "flagged")}/>'


def _legend(items: Sequence[tuple[str, str, str, str]], x: float, y: float, width: float, *,
            lead: float = 22, text_at: float = 21, gap: float = 12) -> tuple[list[str], float]:
    """Legend entries ``(name, kind, colour, dash)`` (kinds: :func:`_key`) laid out in rows from
    ``(x, y)``, each ``lead`` wide before its name (which starts at ``text_at``) and ``gap`` after;
    returns the marks and the height used."""
    parts: list[str] = ['<g class="legend">']
    cx, cy = x, y
    for name, kind, fill, pattern in items:
        entry = lead + _text_width(name) + gap
        if cx + entry > x + width and cx > x:
            cx, cy = x, cy + 16
        parts.append(_key(kind, cx, cy, fill, pattern))
        parts.append(_text(cx + text_at, cy + 10, name, fill=TEXT))
        cx += entry
    parts.append("</g>")
    return parts, (cy - y) + 18 if items else 0.0


def _y_grid(ticks: Sequence[float], py: Callable[[float], float], left: float, plot_w: float,
            label: Formatter) -> list[str]:
    """A grid line and a label at each y tick."""
    parts = []
    for t in ticks:
        parts.append(_line(left, py(t), left + plot_w, py(t), GRID))
        parts.append(_text(left - 6, py(t) + 4, label(t), anchor="end"))
    return parts


def _y_title(x: int, middle: float, title: str) -> str:
    """The y axis's name, upright along the axis."""
    return (f'<text x="{x}" y="{_n(middle)}" text-anchor="middle" fill="{MUTED}"'
            f' transform="rotate(-90 {x} {_n(middle)})">{esc(title)}</text>')


def _x_grid(ticks: Sequence[float], px: Callable[[float], float], top: float, axis_y: float,
            label: Formatter) -> list[str]:
    """A grid line from ``top`` down to the x axis and a label under it at each x tick."""
    parts = []
    for t in ticks:
        parts.append(_line(px(t), top, px(t), axis_y, GRID))
        parts.append(_text(px(t), axis_y + 14, label(t), anchor="middle"))
    return parts


def _x_tick(x: float, axis_y: float, label: str | None) -> list[str]:
    """A tick under the x axis at ``x``, labelled unless ``label`` is ``None``."""
    parts = [_line(x, axis_y, x, axis_y + 4, AXIS)]
    if label is not None:
        parts.append(_text(x, axis_y + 16, label, anchor="middle"))
    return parts


def _axis(lo: float, hi: float, start: float, length: float) -> Callable[[float], float]:
    """The position on an axis of a value, ``lo`` at ``start`` and ``hi`` at ``start + length``
    (values outside are drawn at the nearer end)."""
    span = (hi - lo) or 1.0
    return lambda value: start + (min(max(value, lo), hi) - lo) / span * length


def _svg(width: float, height: float, title: str, description: str, legend: list[str], marks: list[str]) -> str:
    """The whole chart: its accessible name and description, the title shown on top, the legend
    and the marks."""
    return "".join([
        f'<svg class="chart" viewBox="0 0 {_n(width)} {_n(height)}" width="{_n(width)}" height="{_n(height)}"'
        f' role="img" aria-label="{esc(f"{title}. {description}")}" font-family="{esc(FONT)}" font-size="11">',
        f"<title>{esc(title)}</title><desc>{esc(description)}</desc>",
        f'<text x="4" y="16" font-size="13" font-weight="600" fill="{TEXT}" aria-hidden="true">{esc(title)}</text>',
        *legend, *marks, "</svg>",
    ])


# --------------------------------------------------------------------------------------------
# Line chart (trends over days)


def _runs(values: Sequence[_T | None]) -> list[list[tuple[int, _T]]]:
    """The runs of consecutive ``(index, value)`` whose value is not ``None``."""
    runs: list[list[tuple[int, _T]]] = [[]]
    for i, value in enumerate(values):
        if value is not None:
            runs[-1].append((i, value))
        elif runs[-1]:
            runs.append([])
    return [run for run in runs if run]


@dataclass(frozen=True)
class LineSeries:
    """One line: a value per x label (``None`` where there is no data: the line breaks there),
    with an optional band (``(low, high)`` per x label, e.g. a 95% interval)."""

    name: str
    values: Sequence[float | None]
    band: Sequence[tuple[float, float] | None] | None = None
    colour: str | None = None


def _line_ticks(series: Sequence[LineSeries], y_range: tuple[float, float] | None) -> tuple[list[float], float, float]:
    """A line chart's y ticks and the ends of its y axis: ``y_range`` (the ticks outside it
    dropped), or else the round values covering every value and band."""
    if y_range is not None:
        y_lo, y_hi = y_range
        return [t for t in nice_ticks(y_lo, y_hi) if y_lo - 1e-9 <= t <= y_hi + 1e-9], y_lo, y_hi
    values = [v for s in series for v in s.values if v is not None]
    values += [b for s in series for pair in (s.band or []) if pair is not None for b in pair]
    ticks = nice_ticks(*((min(values), max(values)) if values else (0.0, 1.0)))
    return ticks, ticks[0], ticks[-1]


def _line_marks(s: LineSeries, index: int, fill: str, x_labels: Sequence[str], px: Callable[[int], float],
                py: Callable[[float], float], value_format: Formatter) -> list[str]:
    """One series of a line chart: its band, its line broken at the gaps, and a dot per value."""
    parts = []
    band = [s.band[i] if s.band is not None and i < len(s.band) else None for i in range(len(x_labels))]
    for run in _runs(band):  # one polygon per run of consecutive days with a band
        points = [(px(i), low, high) for i, (low, high) in run]
        if len(points) == 1:  # a lone day: a narrow box
            x, low, high = points[0]
            points = [(x - 3, low, high), (x + 3, low, high)]
        upper = [f"{_n(x)},{_n(py(high))}" for x, _, high in points]
        lower = [f"{_n(x)},{_n(py(low))}" for x, low, _ in reversed(points)]
        parts.append(
            f'<polygon points="{" ".join(upper + lower)}" fill="{fill}" fill-opacity="0.13" stroke="none">'
            f"<title>{esc(s.name)}: 95% interval</title></polygon>"
        )
    for stretch in _runs(s.values):  # a path per run of consecutive days with a value, broken at the gaps
        if len(stretch) > 1:
            d = " ".join(("M" if k == 0 else "L") + f"{_n(px(i))},{_n(py(v))}" for k, (i, v) in enumerate(stretch))
            parts.append(f'<path d="{d}" fill="none" stroke="{fill}" stroke-width="2"{_dash_attr(dash(index))}/>')
    for i, v in enumerate(s.values):
        if v is None:
            continue
        tip = f"{s.name} · {x_labels[i]}: {value_format(v)}"
        if pair := band[i]:
            tip += f" (95% interval {value_format(pair[0])} – {value_format(pair[1])})"
        parts.append(
            f'<circle cx="{_n(px(i))}" cy="{_n(py(v))}" r="3" fill="{fill}" stroke="#FFFFFF" stroke-width="1">'
            f"<title>{esc(tip)}</title></circle>"
        )
    return parts


def line_chart(x_labels: Sequence[str], series: Sequence[LineSeries], *, title: str, y_label: str,
               y_range: tuple[float, float] | None = (0.0, 1.0), value_format: Formatter = fmt_decimal,
               tick_format: Formatter | None = None) -> str:
    """Several series over shared x labels (days), with gaps at ``None`` and optional shaded bands
    (95% intervals)."""
    width, height = 560, 250 + TITLE_H
    fills = [s.colour or colour(i) for i, s in enumerate(series)]
    keys = [(s.name, "line", fills[i], dash(i)) for i, s in enumerate(series)]
    legend, legend_h = _legend(keys, 56, 8 + TITLE_H, width - 64)
    top, left, right, bottom = 14 + TITLE_H + legend_h, 56.0, 24.0, 40.0
    plot_w, plot_h = width - left - right, height - top - bottom
    ticks, y_lo, y_hi = _line_ticks(series, y_range)
    py = _axis(y_lo, y_hi, top + plot_h, -plot_h)

    def px(i: int) -> float:
        return left + (plot_w / 2 if len(x_labels) == 1 else i * plot_w / (len(x_labels) - 1))

    marks = _y_grid(ticks, py, left, plot_w, tick_format or value_format)
    step = max(1, math.ceil(len(x_labels) / 8))
    for i, label in enumerate(x_labels):  # the last day always labelled
        if (len(x_labels) - 1 - i) % step == 0:
            marks += _x_tick(px(i), top + plot_h, label)
    marks.append(_line(left, top + plot_h, left + plot_w, top + plot_h, AXIS))
    marks.append(_y_title(14, top + plot_h / 2, y_label))
    for index, s in enumerate(series):
        marks += _line_marks(s, index, fills[index], x_labels, px, py, value_format)
    return _svg(width, height, title, f"{y_label} by day for {len(series)} series", legend, marks)


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


def _amount(value: float) -> str:
    return fmt_count(value) if float(value).is_integer() else fmt_decimal(value)


def _bar_part(x: float, y: float, w: float, h: float, fill: str, tip: str, inner: str) -> list[str]:
    """One segment of a bar, with ``inner`` printed on it where it fits."""
    parts = [f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" fill="{fill}">'
             f"<title>{esc(tip)}</title></rect>"]
    if w >= _text_width(inner, 10) + 6:
        parts.append(
            f'<text x="{_n(x + w / 2)}" y="{_n(y + h / 2 + 3.5)}" text-anchor="middle" font-size="10"'
            f' fill="{_ink(fill)}" pointer-events="none">{esc(inner)}</text>'
        )
    return parts


def stacked_bar_chart(rows: Sequence[BarRow], segments: Sequence[Segment], *, title: str, normalize: bool = True,
                      unit: str = "rows", width: float = 760, bar_height: float = 20) -> str:
    """Horizontal stacked bars, one per row; ``normalize`` shows shares of each row's total
    (with the total printed at the bar's end), otherwise raw values on a shared axis (one segment:
    plain bars, without a legend)."""
    show_legend = len(segments) > 1
    keys = [(s.name, "box", s.colour, "") for s in segments]
    legend, legend_h = _legend(keys, 8, 8 + TITLE_H, width - 16) if show_legend else ([], 0.0)
    top = 14 + TITLE_H + legend_h
    left, right = _label_room([r.label for r in rows], width), 64.0  # right: room for the total
    plot_w = width - left - right
    gap = 8.0
    axis_y = top + len(rows) * (bar_height + gap)
    totals = [sum(r.values) for r in rows]
    if normalize:
        ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
    else:
        integer = all(float(v).is_integer() for r in rows for v in r.values)
        ticks = nice_ticks(0, max(totals, default=0) or 1.0, integer=integer)
    scale_max = ticks[-1] or 1.0
    marks = _x_grid(ticks, lambda t: left + t / scale_max * plot_w, top - 4, axis_y,
                    fmt_percent if normalize else _amount)
    for index, (row, total) in enumerate(zip(rows, totals, strict=True)):
        y = top + index * (bar_height + gap)
        marks.append(_row_label(left - 8, y + bar_height / 2 + 4, row.label, left - 10))
        x = left
        for segment, value in zip(segments, row.values, strict=True):
            if value <= 0:
                continue
            share = value / total if total else 0.0
            w = (share if normalize else value / scale_max) * plot_w
            tip = f"{row.label} — {segment.name}: {_amount(value)} {unit}"
            if normalize or len(segments) > 1:
                tip += f" ({fmt_percent(share)})"
            inner = fmt_percent(share) if normalize else _amount(value)
            marks += _bar_part(x, y, w, bar_height, segment.colour, tip, inner)
            x += w
        if normalize:
            marks.append(_text(left + plot_w + 6, y + bar_height / 2 + 4, f"n={fmt_count(total)}"))
    marks.append(_line(left, top - 4, left, axis_y, AXIS))
    description = f"{len(rows)} bars" + (f" split into {', '.join(s.name for s in segments)}" if show_legend else "")
    return _svg(width, axis_y + 28, title, description, legend, marks)


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


def _interval_ticks(rows: Sequence[Interval], x_range: tuple[float, float] | None) -> list[float]:
    """An interval chart's x ticks: over ``x_range``, or else round values covering every value
    with a margin (kept within [0, 1] when the values are)."""
    if x_range is not None:
        return nice_ticks(*x_range)
    values = [v for r in rows for v in (r.value, r.low, r.high, r.reference) if v is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    pad = max((hi - lo) * 0.1, 0.02)
    return nice_ticks(max(lo - pad, 0.0) if lo >= 0 else lo - pad, min(hi + pad, 1.0) if hi <= 1 else hi + pad)


def _interval_row(row: Interval, fill: str, left: float, y: float, px: Callable[[float], float],
                  value_format: Formatter, reference_label: str) -> list[str]:
    """One row of an interval chart centred on ``y``: its label, whisker, reference and dot."""
    weight = ' font-weight="700"' if row.flagged else ""
    parts = [_row_label(left - 8, y + 4, row.label, left - 10, weight)]
    if row.value is None:
        return [*parts, _text(left + 4, y + 4, "no data")]
    tip = f"{row.label}: {value_format(row.value)}"
    if row.low is not None and row.high is not None:
        tip += f" (95% interval {value_format(row.low)} – {value_format(row.high)})"
        x1, x2 = px(row.low), px(row.high)
        parts.append(_line(x1, y, x2, y, fill, ' stroke-width="2"'))
        for x in (x1, x2):
            parts.append(_line(x, y - 5, x, y + 5, fill, ' stroke-width="2"'))
    if row.reference is not None:
        flag_note = ", outside the interval" if row.flagged else ""
        parts.append(
            f'<path d="{_diamond(px(row.reference), y, 5, 6)}" fill="#FFFFFF" fill-opacity="0.6"'
            f"{_reference_stroke(row.flagged)}>"
            f"<title>{esc(f'{row.label}: {reference_label} {value_format(row.reference)}{flag_note}')}</title></path>"
        )
    parts.append(
        f'<circle cx="{_n(px(row.value))}" cy="{_n(y)}" r="4.5" fill="{fill}" stroke="#FFFFFF" stroke-width="1">'
        f"<title>{esc(tip)}</title></circle>"
    )
    return parts


def interval_chart(rows: Sequence[Interval], *, title: str, x_label: str, value_format: Formatter = fmt_decimal,
                   x_range: tuple[float, float] | None = None, reference_label: str = "trailing 7-day mean",
                   width: float = 460) -> str:
    """Dots with 95% whiskers per row; a hollow diamond marks each row's reference value."""
    entries = [("estimate, 95% interval", "whisker", TEXT, "")]
    if any(r.reference is not None for r in rows):
        entries.append((reference_label, "reference", MUTED, ""))
    if any(r.flagged and r.reference is not None for r in rows):
        entries.append((f"{reference_label} outside the interval", "flagged", MUTED, ""))
    legend, legend_h = _legend(entries, 8, TITLE_H + 2, width - 16, lead=24, text_at=24, gap=16)
    top = 14 + TITLE_H + legend_h
    left, right = _label_room([r.label for r in rows], width), 20.0
    plot_w = width - left - right
    row_h = 24.0
    axis_y = top + len(rows) * row_h
    ticks = _interval_ticks(rows, x_range)
    px = _axis(ticks[0], ticks[-1], left, plot_w)
    marks = _x_grid(ticks, px, top - 6, axis_y, value_format)
    marks.append(_text(left + plot_w / 2, axis_y + 32, x_label, anchor="middle"))
    for index, row in enumerate(rows):
        marks += _interval_row(row, row.colour or colour(index), left, top + index * row_h + row_h / 2, px,
                               value_format, reference_label)
    marks.append(_line(left, axis_y, left + plot_w, axis_y, AXIS))
    return _svg(width, axis_y + 40, title, f"{x_label} with 95% intervals for {len(rows)} rows", legend, marks)


# --------------------------------------------------------------------------------------------
# Histogram (of values in [0, 1], such as metrics)


def bin_expr(value: pl.Expr, *, bins: int = 10) -> pl.Expr:
    """The bin of ``value`` among ``bins`` equal bins over ``[0, 1]``, as a Polars expression
    (counted per bin in a query): each bin holds its lower edge, the last one also 1; values
    outside go to the first or last bin. Edges are decided on the value rounded to 9 decimals of a
    bin, so that 0.3 falls in [0.3, 0.4)."""
    return (value * bins).round(9).floor().clip(0, bins - 1).cast(pl.Int64)


@dataclass(frozen=True)
class HistogramSeries:
    """One group's counts per bin."""

    name: str
    counts: Sequence[int]
    colour: str | None = None


def histogram(series: Sequence[HistogramSeries], *, title: str, x_label: str, width: float = 380) -> str:
    """Histogram of equal bins over ``[0, 1]``; several series are drawn as grouped bars and
    scaled to their share of the series (so groups of different sizes compare)."""
    bins = len(series[0].counts) if series else 10
    height = 220 + TITLE_H
    fills = [s.colour or colour(i) for i, s in enumerate(series)]
    legend, legend_h = _legend([(f"{s.name} ({sum(s.counts)})", "box", fills[i], "") for i, s in enumerate(series)], 40,
                               8 + TITLE_H, width - 48)
    top, left, right, bottom = 14 + TITLE_H + legend_h, 48.0, 12.0, 42.0
    plot_w, plot_h = width - left - right, height - top - bottom
    shares = [[c / (sum(s.counts) or 1) for c in s.counts] for s in series]
    peak = max((v for row in shares for v in row), default=0.0) or 1.0
    ticks = nice_ticks(0.0, peak, 4)
    y_hi = ticks[-1] or 1.0

    def py(v: float) -> float:
        return top + plot_h - v / y_hi * plot_h

    edges = [i / bins for i in range(bins + 1)]
    bin_w = plot_w / bins
    bar_w = max((bin_w - 2) / max(len(series), 1), 1.0)
    parts = _y_grid(ticks, py, left, plot_w, fmt_percent)
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
        parts += _x_tick(left + i * bin_w, top + plot_h, fmt_decimal(edge) if i % label_every == 0 or i == bins else None)
    parts.append(_line(left, top + plot_h, left + plot_w, top + plot_h, AXIS))
    parts.append(_text(left + plot_w / 2, height - 6, x_label, anchor="middle"))
    parts.append(_y_title(12, top + plot_h / 2, "share of rows"))
    total = sum(sum(s.counts) for s in series)
    return _svg(width, height, title, f"distribution of {total} values in {bins} bins from 0 to 1", legend, parts)


# --------------------------------------------------------------------------------------------
# ROC curves (calibration)


def roc_chart(curves: Mapping[str, Sequence[tuple[float, float, float]]], *, title: str,
              marks: Sequence[tuple[str, float, float]] = (), width: float = 420, height: float = 400) -> str:
    """ROC curves (false positive rate → true positive rate) of several metrics on one square plot,
    with the diagonal of chance and optional marked operating points ``(label, fpr, tpr)``; each
    curve's points are ``(threshold, fpr, tpr)``."""
    keys = [(name, "line", colour(i), dash(i)) for i, name in enumerate(curves)]
    legend, legend_h = _legend(keys, 52, 8 + TITLE_H, width - 60)
    top, left, right, bottom = 14 + TITLE_H + legend_h, 52.0, 16.0, 44.0
    size = min(width - left - right, height - top - bottom)
    height = top + size + bottom
    px, py = _axis(0.0, 1.0, left, size), _axis(0.0, 1.0, top + size, -size)
    ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
    parts = _y_grid(ticks, py, left, size, fmt_decimal) + _x_grid(ticks, px, top, top + size, fmt_decimal)
    parts.append(f'<rect x="{_n(left)}" y="{_n(top)}" width="{_n(size)}" height="{_n(size)}" fill="none" stroke="{AXIS}"/>')
    parts.append(f'<line x1="{_n(px(0))}" y1="{_n(py(0))}" x2="{_n(px(1))}" y2="{_n(py(1))}" stroke="{AXIS}"'
                 ' stroke-dasharray="3 3"><title>chance (AUROC 0.5)</title></line>')
    parts.append(_text(left + size / 2, top + size + 32, "false positive rate (faithful answers flagged)", anchor="middle"))
    parts.append(_y_title(14, top + size / 2, "true positive rate (hallucinations flagged)"))
    for index, (name, points) in enumerate(curves.items()):
        d = " ".join(("M" if i == 0 else "L") + f"{_n(px(fpr))},{_n(py(tpr))}" for i, (_, fpr, tpr) in enumerate(points))
        stroke = f'stroke="{colour(index)}" stroke-width="{3 if index == 0 else 2}"{_dash_attr(dash(index))}'  # the first wider
        parts.append(f'<path d="{d}" fill="none" {stroke}><title>{esc(name)}</title></path>')
    for name, fpr, tpr in marks:
        parts.append(
            f'<circle cx="{_n(px(fpr))}" cy="{_n(py(tpr))}" r="5" fill="#FFFFFF" stroke="{TEXT}" stroke-width="2">'
            f"<title>{esc(name)}: false positive rate {fpr:.3f}, true positive rate {tpr:.3f}</title></circle>"
        )
    return _svg(width, height, title, f"ROC curves of {', '.join(curves)}", legend, parts)
