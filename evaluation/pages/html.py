"""The pages' shared HTML: the page shell with its inline style sheet, and the table, so that the
daily report, a comparison and a calibration read alike. Below every page module."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from evaluation.pages.charts import esc

CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f6f7f9; color: #1d1f23;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header.top { background: #1f2a37; color: #fff; padding: 20px 32px 16px; }
header.top h1 { margin: 0 0 4px; font-size: 22px; font-weight: 650; }
header.top p { margin: 2px 0; color: #d5dbe3; font-size: 13px; }
header.top code { color: #fff; overflow-wrap: anywhere; }
nav { background: #fff; border-bottom: 1px solid #dde1e6; padding: 8px 32px; position: sticky; top: 0; z-index: 1; }
nav a { color: #0b5cad; margin-right: 16px; text-decoration: none; font-size: 13px; }
nav a:hover { text-decoration: underline; }
main { max-width: 1280px; margin: 0 auto; padding: 8px 32px 48px; }
section { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 16px 20px; margin: 18px 0; }
section.banner { border: 2px solid #b03a00; background: #fff6f2; }
h2 { font-size: 18px; margin: 0 0 10px; }
h3 { font-size: 15px; margin: 18px 0 8px; }
p.note, .note { color: #4d5561; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; }
.card { border: 1px solid #dde1e6; border-radius: 6px; padding: 10px 12px; background: #fbfcfd; }
.card .label { color: #4d5561; font-size: 12px; }
.card .value { font-size: 22px; font-weight: 650; font-variant-numeric: tabular-nums; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 4px 0 8px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e6e8eb; text-align: left; vertical-align: top; }
th { font-weight: 600; color: #333a44; background: #f3f5f7; font-size: 12.5px; }
td.num { text-align: right; white-space: nowrap; }
th.num { text-align: right; }
td.measure { font-weight: 600; }
tr.group-start td { border-top: 2px solid #cfd5dc; }
.flag { font-weight: 700; }
.worse { color: #b03a00; }
.better { color: #0b5cad; }
.changed { color: #6a3d9a; }
.muted { color: #6b7380; }
.charts { display: flex; flex-wrap: wrap; gap: 18px 26px; align-items: flex-start; }
figure { margin: 0; }
figcaption { font-size: 12.5px; color: #4d5561; margin-top: 2px; }
svg.chart { max-width: 100%; height: auto; display: block; }
ul.plain { margin: 0; padding-left: 16px; }
ul.plain li { margin: 0 0 2px; }
td.text { max-width: 360px; overflow-wrap: anywhere; font-size: 12.5px; }
td.nowrap, td.nowrap li { white-space: nowrap; }
td.text code { overflow-wrap: anywhere; }
table.compact th, table.compact td { padding: 4px 7px; }
pre.raw { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px; max-width: 560px; }
code { font-size: 12.5px; }
footer { color: #4d5561; font-size: 12.5px; margin-top: 20px; }
"""


def table(header: Iterable[str], rows: Iterable[str], *, compact: bool = False) -> str:
    """A table that scrolls sideways on a narrow page: ``header`` holds ``<th>`` cells, ``rows`` whole rows."""
    cls = ' class="compact"' if compact else ""
    return (f'<div class="table-wrap"><table{cls}><thead><tr>{"".join(header)}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def page(title: str, heading: str, meta: Sequence[str], nav: Iterable[tuple[str, str]],
         sections: Sequence[str]) -> str:
    """A self-contained page in the report's style, ``nav`` linking each (anchor, title): no script,
    nothing fetched (its Content Security Policy allows inline CSS and data: images only), nothing
    sent as a referrer."""
    links = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in nav)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(title)}</title>"
        f"<style>{CSS}</style></head><body>"
        f'<header class="top"><h1>{esc(heading)}</h1><p>{" · ".join(meta)}</p></header>'
        f"<nav>{links}</nav><main>{''.join(sections)}</main></body></html>\n"
    )
