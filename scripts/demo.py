"""``make demo``: a week of the daily DAG's work on the embedded default, and the report that
shows what the product is for.

Starts a real S3 API in-process on loopback (moto's server mode) and writes seven generated days
of conversation logs to it; on the last day :data:`REGRESSING_MODEL`'s answers in
:data:`REGRESSING_LOCALE` lose their grounding (:data:`evaluation.testing.synthetic.UNGROUNDED`).
The six earlier days are evaluated in-process by :func:`evaluation.cli.day.run_day`, the last one
by ``daily_evaluation`` under Airflow (``dag.test()``). What it generates, prints and copies to
``demo-output/``: README.md, first section.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scripts import airflow_local

if TYPE_CHECKING:  # the project is imported after airflow_local.configure()
    from evaluation.storage import Store

INPUT_URI = "s3://llm-logs/raw"
OUTPUT_URI = "s3://llm-evaluation/curated"
DEMO_OUTPUT = airflow_local.REPO / "demo-output"
#: The model whose answers lose their grounding on the demo's last day, in one locale.
REGRESSING_MODEL = "assistant-v2"
REGRESSING_LOCALE = "de"
#: Like a real export, each generated day ends with a completion marker, which the DAG waits for.
MARKER = "_SUCCESS"
RUN_CONF: dict[str, Any] = {"judge_model": "offline/lexical", "chunk_size": 150, "concurrency": 16, "completion_marker": MARKER,
                            "segments": "metadata.locale"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--date", type=dt.date.fromisoformat,
                        default=dt.date.today() - dt.timedelta(days=1), help="the last day to generate and evaluate")
    parser.add_argument("--days", type=int, default=7, help="days to generate and evaluate, ending on --date")
    parser.add_argument("--records", type=int, default=450, help="valid records to generate per day")
    parser.add_argument("--output", type=Path, default=DEMO_OUTPUT, help="local copy of the week's tables and reports")
    args = parser.parse_args(argv)

    started = time.monotonic()
    airflow_local.configure()
    from evaluation import storage
    from evaluation.cli.day import run_day
    from evaluation.contract.config import RunConfig
    from evaluation.stages import Stores
    from evaluation.testing import synthetic
    from evaluation.testing.s3 import local_s3_environment

    days = [args.date - dt.timedelta(days=i) for i in range(args.days - 1, -1, -1)]
    with local_s3_environment("llm-logs", "llm-evaluation") as s3:
        print(f"S3 API on {s3.endpoint_url} (moto, in-process)")
        s3_access = s3.access()
        raw = storage.open_store(INPUT_URI, s3_access)
        for day in days:
            synthetic.write_day(raw, day, args.records, behaviour=last_day_behaviour() if day == args.date else None)
            raw.write_bytes(f"{storage.raw_prefix(day)}{MARKER}", b"")
        print(f"wrote {args.records} generated records (+ planted bad ones) a day for {days[0]} to {days[-1]} "
              f"under {raw.uri('')}; on {args.date} {REGRESSING_MODEL}'s answers in locale={REGRESSING_LOCALE} lose "
              "their grounding")

        for day in days[:-1]:
            day_started = time.monotonic()
            cfg = RunConfig(date=day, input_uri=INPUT_URI, output_uri=OUTPUT_URI, run_id=f"demo-{day}", **RUN_CONF)
            result = run_day(cfg, Stores.open(cfg, s3_access))
            print(f"evaluated {day} in-process: {result.valid} valid records, {time.monotonic() - day_started:.0f}s")

        if not run_last_day(args.date):
            return 1
        print_week(storage.open_store(OUTPUT_URI, s3_access), days, args.output)
    print(f"done in {time.monotonic() - started:.0f}s")
    return 0


def run_last_day(day: dt.date) -> bool:
    """The last day, evaluated by ``daily_evaluation`` under Airflow: whether its run succeeded."""
    print("preparing Airflow (metadata DB in .airflow/) ...")
    airflow_local.migrate()
    airflow_local.ensure_pool()
    conf = {"input_uri": INPUT_URI, "output_uri": OUTPUT_URI, **RUN_CONF}
    print(f"running daily_evaluation for {day} with dag.test() ...")
    dag_run = airflow_local.run_dag("daily_evaluation", day, conf)
    print(f"DAG run {dag_run.run_id}: {dag_run.state}")
    for task, state in sorted(airflow_local.task_states(dag_run).items()):
        print(f"  {task:<24} {state}")
    if str(dag_run.state) == "success":
        return True
    print("the DAG run failed; see the task logs above", file=sys.stderr)
    return False


def print_week(out: Store, days: list[dt.date], target: Path) -> None:
    """What the week landed and its reports raised, its local copy, and the README's commands over it."""
    from evaluation import storage

    *steady, summary = [storage.read_json(out, storage.report_key(day, "summary.json")) for day in days]
    print_summary(out, days[-1])
    print_trends(summary)
    print("\nsteady days (no model changed): what their reports raised")
    print("\n".join(steady_day_lines(steady)))
    alerting = summary.get("alerting", [])
    print(f"\n{summary['dt']} headline: {', '.join(alerting) + ' regressed' if alerting else 'no model regressed'}")
    print("\n".join(headline_lines(summary)))
    print_flags(summary["flags"])
    copied = copy_outputs(out, target)
    print(f"\ncopied the week's {copied} landed objects ({days[0]} to {days[-1]}) to {target}/ "
          "(what else is there is kept)")
    report = storage.report_key(days[-1])
    print(f"daily quality report: {target / report} (landed at {out.uri(report)})")
    print("\ntry, over the demo's output:")
    for command in next_steps(days, target):
        print(f"  .venv/bin/{command}")


def last_day_behaviour() -> dict[str, tuple[float, float, float]]:
    """The last day's changed behaviour: the regressing model's records of its locale lose their grounding."""
    from evaluation.testing import synthetic  # after airflow_local.configure(), like every import of the project here

    return {f"{REGRESSING_MODEL}@{REGRESSING_LOCALE}": synthetic.UNGROUNDED}


def steady_day_lines(summaries: list[dict[str, Any]]) -> list[str]:
    """One line per steady day's report: its flags and the models it alerted on (none, when the
    method holds its false-alarm rate), and a closing count."""
    lines, alerted = [], 0
    for summary in summaries:
        flags, alerting = summary.get("flags", []), summary.get("alerting", [])
        alerted += bool(alerting)
        compared = any(m.get("trailing_7d") for g in summary.get("groups", []) for m in g["rates"].values())
        state = f"alerts on {', '.join(alerting)}" if alerting else "no alert"
        lines.append(f"  {summary['dt']}  {len(flags)} flag(s), {state}" + ("" if compared else " (no earlier day yet)"))
    lines.append(f"  {alerted} of {len(summaries)} steady day(s) alerted")
    return lines


def _changes(changes: list[dict[str, Any]]) -> str:
    shown = "; ".join(f"{c['judge']} {c['measure']} {c['before']:.3f} -> {c['after']:.3f} ({c['delta']:+.3f})"
                      for c in changes[:4])
    return shown + (f"; +{len(changes) - 4} more" if len(changes) > 4 else "")


def headline_lines(summary: dict[str, Any]) -> list[str]:
    """The report's headline: one line per model, regressed first, with its largest changes, and
    one per segment that regressed (``assistant-v2 regressed in locale=de: ...``)."""
    lines = [f"  {line['model']:<15} {line.get('text') or line['status']}"
             + (f": {_changes(line['changes'])}" if line["changes"] else "") for line in summary.get("headline", [])]
    for line in (summary.get("segments") or {}).get("headline", []):
        name = line["segment"]["key"].removeprefix("metadata.")
        others = f"; other {name} values steady" if line.get("others_steady") else ""
        lines.append(f"  {line['model']:<15} regressed in {name}={line['segment']['value']}: "
                     f"{_changes(line['changes'])}{others}")
    return lines


def print_flags(flags: list[dict[str, Any]], limit: int = 12) -> None:
    """The most severe flags, one line each: model, judge, measure, today against the baseline."""
    from evaluation.report import FLAG_BASELINES

    alerting = sum(1 for f in flags if f["alerts"])
    print(f"\nflags: {len(flags)}, {alerting} alerting (most severe first; only worse changes of headline "
          "measures alert)")
    for flag in flags[:limit]:
        base = FLAG_BASELINES[flag["baseline"]]
        print(f"  {flag['assessment']:<7} {flag['model']:<15} {flag['judge']:<6} {flag['measure']:<24} "
              f"{flag['value']:.3f} vs {flag['baseline_value']:.3f} ({base}, delta {flag['delta']:+.3f}, "
              f"adjusted p {flag['p_adjusted']:.1g}){' ALERT' if flag['alerts'] else ''}")
    if len(flags) > limit:
        print(f"  ... and {len(flags) - limit} more in the report")


def print_trends(summary: dict[str, Any]) -> None:
    """Pass rate per model and judge over the report's trend window, one column a day."""
    groups = summary.get("groups", [])
    days = sorted({p["dt"] for g in groups for p in g["trend"]})
    print(f"\ntrends: pass rate of ok rows, {days[0] if days else '-'} to {days[-1] if days else '-'}")
    print("  " + " " * 23 + " ".join(f"{d[5:]:>6}" for d in days))
    for group in groups:
        points = {p["dt"]: p["pass_rate"] for p in group["trend"]}
        cells = " ".join("     -" if points.get(d) is None else f"{points[d]:6.1%}" for d in days)
        print(f"  {group['model']:<15} {group['judge']:<7}{cells}")


def print_summary(out: Store, day: dt.date) -> None:
    """Counts per model, judge, status and verdict of the landed day."""
    import polars as pl

    from evaluation import storage

    evaluations = storage.read_day(out, "evaluations", day)
    rejects = storage.read_day(out, "rejects", day)
    pl.Config.set_tbl_rows(60)
    pl.Config.set_tbl_hide_dataframe_shape(True)
    columns = ("model", "judge", "judge_status", "verdict")
    counts = evaluations.group_by(*columns).len("rows").sort(*columns, nulls_last=True)
    print(f"\nevaluations for {day}: {evaluations.height} rows")
    print(counts)
    print(f"\nrejects: {rejects.height}")
    for row in rejects.iter_rows(named=True):
        print(f"  {row['source_uri'].rsplit('/', 1)[-1]}:{row['line_no']}  {row['record_id']}  {'; '.join(row['reasons'])}")


#: What the demo wrote into its output folder last time: only these are replaced by the next demo.
WRITTEN_LIST = ".demo-files"


def copy_outputs(out: Store, target: Path) -> int:
    """Copy the landed objects of the demo's week (every table, validation results, reports, and
    the days' commit records under ``_landed/``, through which the commands read the days) to a
    local folder, replacing only what the previous demo wrote there (listed in
    :data:`WRITTEN_LIST`): calibrations or notes that users put beside them stay."""
    listed = target / WRITTEN_LIST
    if listed.is_file():
        for name in listed.read_text(encoding="utf-8").split():
            path = target / name
            path.unlink(missing_ok=True)
            for folder in path.parents:  # and the folders that held nothing else
                if folder == target or not folder.is_dir() or any(folder.iterdir()):
                    break
                folder.rmdir()
    written = []
    for info in out.list(""):
        if info.key.startswith("_") and not info.key.startswith("_landed/"):
            continue
        path = target / info.key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(out.read_bytes(info.key))
        written.append(info.key)
    listed.write_text("\n".join(written) + "\n", encoding="utf-8")
    return len(written)


def next_steps(days: list[dt.date], target: Path) -> list[str]:
    """The README's commands over the demo's output, with the demo's own dates."""
    where = target.relative_to(airflow_local.REPO) if target.is_relative_to(airflow_local.REPO) else target
    return [
        f"python -m evaluation report --date {days[-1]} --output {where}",
        f"python -m evaluation compare --from {days[0]} --to {days[-1]} --models assistant-v2,assistant-lite "
        f"--baseline assistant-lite --seed 7 --output {where}",
        f"python -m evaluation sql --output {where} \"SELECT model, judge, avg(score) AS mean_score FROM evaluations "
        f"WHERE judge_status = 'ok' AND dt = DATE '{days[-1]}' GROUP BY model, judge ORDER BY model, judge\"",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
