"""The small pieces of the pages' HTML: number formats, cells, rows, notes, sections and cards (every
text HTML-escaped by the caller through :func:`evaluation.pages.charts.esc`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from evaluation.pages.charts import esc

__all__ = ["ARROWS", "bullets", "cards", "cell", "figure", "first_of", "fmt", "fmt_ci", "fmt_delta", "fmt_mean",
           "fmt_rate", "note", "num", "row", "section", "th"]

MINUS = "\u2212"
ARROWS = {"up": "▲", "down": "▼"}


def signed(text: str) -> str:
    return text.replace("-", MINUS)


def fmt_rate(value: float | None) -> str:
    """A share as a percentage with one decimal."""
    return "–" if value is None else signed(f"{value * 100:.1f}%")


def fmt_mean(value: float | None) -> str:
    """A metric value with three decimals."""
    return "–" if value is None else signed(f"{value:.3f}")


def fmt(kind: str, value: float | None) -> str:
    return fmt_rate(value) if kind == "rate" else fmt_mean(value)


def fmt_delta(kind: str, value: float | None) -> str:
    if value is None:
        return "–"
    return signed(f"{value * 100:+.1f} pp") if kind == "rate" else signed(f"{value:+.3f}")


def fmt_ci(kind: str, low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "–"
    return f"{fmt(kind, low)} – {fmt(kind, high)}"


def figure(value: Any, digits: int = 3) -> str:
    """A figure as Python prints it (a hyphen for its minus), – for None or not finite; any other value as text."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return esc(value)


def num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    return signed(f"{value:,.{digits}f}")


def cell(text: str, *, num: bool = False, cls: str = "", title: str = "", rowspan: int = 1) -> str:
    classes = " ".join(c for c in ("num" if num else "", cls) if c)
    attrs = f' class="{classes}"' if classes else ""
    if title:
        attrs += f' title="{esc(title)}"'
    if rowspan > 1:
        attrs += f' rowspan="{rowspan}"'
    return f"<td{attrs}>{text}</td>"


def th(text: str, num: bool = False, title: str = "") -> str:
    attrs = ' class="num"' if num else ""
    if title:
        attrs += f' title="{esc(title)}"'
    return f'<th scope="col"{attrs}>{esc(text)}</th>'


def row(cells: Iterable[str], cls: str = "") -> str:
    attrs = f' class="{cls}"' if cls else ""
    return f"<tr{attrs}>{''.join(cells)}</tr>"


def note(text: str) -> str:
    return f'<p class="note">{text}</p>'


def section(anchor: str, title: str, *body: str) -> str:
    return f'<section id="{anchor}"><h2>{title}</h2>{"".join(body)}</section>'


def cards(items: Iterable[tuple[str, str]]) -> str:
    """Headline figures: label and HTML value."""
    body = "".join(f'<div class="card"><div class="label">{esc(k)}</div><div class="value">{v}</div></div>'
                   for k, v in items)
    return f'<div class="cards">{body}</div>'


def first_of(texts: Sequence[str], shown: int) -> str:
    """The first ``shown`` of ``texts`` joined by semicolons, then how many more there are."""
    return "; ".join(texts[:shown]) + (f"; and {len(texts) - shown} more" if len(texts) > shown else "")


def bullets(items: Sequence[str] | None) -> str:
    if not items:
        return '<span class="muted">–</span>'
    return '<ul class="plain">' + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>"
