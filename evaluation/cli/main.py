"""``python -m evaluation``: the pipeline's stages by hand, with no scheduler.

* ``run``: evaluate one day (ingest, validate, judge, score, land) and print a JSON summary
  with the counts of CONTRACT §4.
* ``plan``: read and validate a day and print, without any judge call, its records, rejects,
  judge calls, tokens, cost (online and batch) and judging time (``run --dry-run`` does the same).
* ``compare``: compare models over a date range (landed scores, or a re-judged sample), land
  ``comparisons/`` and a report page, print a JSON summary of the deltas.
* ``sql``: run SQL over the landed tables (Polars SQL, dt partitions pruned) and print or save it.
* ``report``: build a day's HTML report and ``summary.json`` from the landed tables, print the page's URI.
* ``gc``: apply the retention of working data (``_work/``, ``_failed/``, the ledger, objects no
  day's commit names); a dry run unless ``--apply``.
* ``calibrate``: judge a golden set (human-labelled records) and land the judges' agreement with the
  labels under ``calibrations/`` with a page; print a JSON summary of the figures.
* ``review``: queue a day's records for people, send them to Label Studio or export them as
  JSONL / Parquet, and land their labels in ``human_labels`` (docs/people.md).
* ``generate``: write a realistic day of sample logs (own or openai-chat records) to try ``run`` on.

S3 is reached with boto3's own chain (the environment's keys, ``AWS_PROFILE`` or ``--aws-profile``,
a web identity, the instance role) at ``--endpoint-url`` (default ``AWS_ENDPOINT_URL``, else AWS).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluation.cli import calibrate as calibration_cli
from evaluation.cli import review as review_cli
from evaluation.cli import sample_logs
from evaluation.cli.support import (
    KEY_HINT,
    CliError,
    Parser,
    ProgressBars,
    add_options,
    api_key_from_env,
    bounded,
    comparison_lines,
    day_expression,
    dispatch,
    iso_date,
    option_values,
    route_third_party_logs,
)
from evaluation.contract.adapters import accepted_baselines as parse_accepted_baselines
from evaluation.contract.comparison import ComparisonSpec
from evaluation.contract.config import Retention
from evaluation.contract.options import (
    COMPARE_OPTIONS,
    RETENTION_OPTIONS,
    RUN_OPTIONS,
    build_config,
    env_name,
    read_options,
)


def _run_parser(sub: Any) -> None:
    parser = sub.add_parser("run", help="evaluate one day and print a JSON summary")
    parser.add_argument("--date", required=True, type=iso_date, help="the day (dt) to evaluate, YYYY-MM-DD")
    parser.add_argument("--run-id", default=None, help="id of this run (default: cli-<date>-<time>)")
    add_options(parser, RUN_OPTIONS)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar and no stage lines on stderr")


def _plan_parser(sub: Any) -> None:
    parser = sub.add_parser("plan", help="size a day before paying: calls, tokens, cost and time, no judge call")
    parser.add_argument("--date", type=iso_date, help="the day (dt) to plan, YYYY-MM-DD (or --records)")
    parser.add_argument("--records", type=bounded(int, 1, None), default=None,
                        help="size a day of this many records instead, with no input read: calls, tokens, chunks, "
                             "batches, time, rates and pool slots needed, cost (a Markdown table)")
    parser.add_argument("--record-tokens", type=bounded(int, 1, None), default=None,
                        help="with --records: tokens of a record's question, answer, contexts and reference "
                             "(default 800)")
    add_options(parser, [o for o in RUN_OPTIONS if o.name != "dry_run"])
    parser.add_argument("--pool-slots", type=int, default=1,
                        help="chunks judged at once (the llm_judge pool's slots; default 1, as `run` judges them)")
    parser.add_argument("--latency-s", type=float, default=None,
                        help="seconds one judge call takes (default 2, 0 for the offline judge)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")


def _print_plan(cfg: Any, s3_access: Callable[[], Any], *, pool_slots: int = 1, latency_s: float | None = None,
                as_json: bool = False) -> int:
    # Polars and the stages: only for this command, so `evaluation --help` starts fast
    from evaluation import stages, storage

    stores = stages.Stores(*storage.open_stores(cfg.input_uri, cfg.output_uri, make_access=s3_access))
    try:
        size = stages.plan_day(cfg, stores, pool_slots=pool_slots, latency_s=latency_s)
    except stages.RunFailed as exc:
        print(json.dumps({"status": "failed", "dt": cfg.date.isoformat(), "error": str(exc)}, indent=2))
        return 1
    print(size.model_dump_json(indent=2) if as_json else stages.size_text(size))
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    if args.pool_slots < 1:
        raise CliError("--pool-slots must be at least 1")
    if args.records is not None:
        return _print_records_plan(args)
    if args.date is None:
        raise CliError("plan needs --date (a day to read) or --records (a day of that many records)")
    cfg = build_config({**option_values(args, RUN_OPTIONS), "dry_run": True}, date=args.date, run_id=f"plan-{args.date.isoformat()}",
                       trigger="cli")
    return _print_plan(cfg, args.s3_access, pool_slots=args.pool_slots, latency_s=args.latency_s, as_json=args.json)


def _print_records_plan(args: argparse.Namespace) -> int:
    """``plan --records N``: the sizing of a day of N records, no input read."""
    # litellm: only for this command, so `evaluation --help` starts fast
    from evaluation.stages.sizing_records import RECORD_TOKENS, records_table

    if args.date is not None or args.json:
        raise CliError("--records sizes a day without reading one: leave out --date and --json")
    values = {"input_uri": "-", "output_uri": "-", **option_values(args, RUN_OPTIONS), "dry_run": True}
    cfg = build_config(values, date=dt.date.today(), run_id="plan-records", trigger="cli")
    print(records_table(cfg, args.records, record_tokens=args.record_tokens or RECORD_TOKENS,
                        pool_slots=args.pool_slots, latency_s=args.latency_s))
    return 0


def stage_line(day: dt.date, stage: str, figures: dict[str, Any]) -> str:
    """One line on stderr for a finished stage of ``run``."""
    seconds = f"({figures['seconds']:.1f} s)"
    if stage == "check":
        return f"{day} check: judge model {figures['judge_model']} answered a probe call {seconds}"
    if stage == "ingest":
        return (f"{day} ingest + validate: {figures['input']:,} records in {figures['objects']} objects, "
                f"{figures['valid']:,} valid, {figures['rejected']:,} rejected {seconds}")
    if stage == "plan":
        estimate = figures.get("estimate") or {}
        return (f"{day} plan: {figures['records']:,} records ({figures.get('sampled') or 0:,} to judge) in "
                f"{figures['chunks']} chunks; estimate {estimate.get('calls', 0):,} judge calls, "
                f"~{estimate.get('prompt_tokens', 0):,} input + ~{estimate.get('output_tokens', 0):,} output tokens, "
                f"${estimate.get('cost_usd', 0.0):,.2f}"
                + (f" (batch ${estimate['batch_cost_usd']:,.2f})" if estimate.get("batch_cost_usd") is not None else "")
                + f" {seconds}")
    if stage == "land":
        statuses = ", ".join(f"{n:,} {s}" for s, n in figures["statuses"].items() if n)
        return (f"{day} landed {figures['rows']:,} rows ({statuses or 'none'}); {figures['calls_made']:,} calls made, "
                f"{figures['calls_reused']:,} reused, ${figures['cost_usd']:.4f} {seconds}")
    return f"{day} report: {figures['html']} {seconds}"


def _cmd_run(args: argparse.Namespace) -> int:
    # Polars and the stages: only for this command, so `evaluation --help` starts fast
    from evaluation import stages, storage
    from evaluation.cli.day import run_day

    values = option_values(args, RUN_OPTIONS)
    for option in (o for o in RUN_OPTIONS if o.name in ("input_uri", "output_uri")):
        if not values.get(option.name) and not os.environ.get(option.env or ""):
            raise CliError(f"{option.flags[0]} is required (or set {option.env})")
    run_id = args.run_id or f"cli-{args.date.isoformat()}-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
    cfg = build_config(values, date=args.date, run_id=run_id, trigger="cli")
    if cfg.dry_run:  # stop after planning: the plan, as `plan` prints it
        return _print_plan(cfg, args.s3_access)
    stores = stages.Stores(*storage.open_stores(cfg.input_uri, cfg.output_uri, make_access=args.s3_access))
    bars = ProgressBars(not args.no_progress)

    def planned(total: int) -> None:
        bars.start(f"judging {cfg.date}", total)

    def stage(name: str, figures: dict[str, Any]) -> None:
        bars.close()  # the judging is over
        if not args.no_progress:
            print(stage_line(cfg.date, name, figures), file=sys.stderr, flush=True)

    try:
        waited = None
        if {"completion_marker", "quiet_period_s"} & set(values):  # the CLI waits only when asked to
            # Polars via the stages: only when waiting for a day
            from evaluation.stages.wait import wait_for_day

            waited = wait_for_day(cfg, stores, on_wait=None if args.no_progress else
                                  lambda line: print(f"{cfg.date} wait: {line}", file=sys.stderr, flush=True))
        result = run_day(
            cfg,
            stores,
            api_key=api_key_from_env(cfg.api_base),
            key_hint=KEY_HINT,
            on_wait=None if args.no_progress else lambda line: print(line, file=sys.stderr, flush=True),
            progress=bars.update,
            on_planned=planned,
            on_stage=stage,
            waited_s=waited,
        )
    except (stages.RunFailed, stages.JudgeUnreachable) as exc:
        bars.close()
        failed: dict[str, Any] = {"status": "failed", "run_id": run_id, "dt": cfg.date.isoformat(), "error": str(exc)}
        if getattr(exc, "reject_reasons", None):
            failed["rejects_by_reason"] = [r.model_dump() for r in exc.reject_reasons]  # type: ignore[union-attr]
        print(json.dumps(failed, indent=2))
        return 1
    print(json.dumps({"status": "success", **result.model_dump(mode="json")}, indent=2))
    return 0


def _output_option(parser: Any) -> None:
    parser.add_argument("--output", "--output-uri", dest="output_uri", default=os.environ.get("EVALUATION_OUTPUT_URI"),
                        required=not os.environ.get("EVALUATION_OUTPUT_URI"), metavar="URI",
                        help="root of the landed tables (s3://bucket/prefix or a directory; default $EVALUATION_OUTPUT_URI)")


def _compare_parser(sub: Any) -> None:
    parser = sub.add_parser("compare", help="compare models over a date range and print its largest differences "
                                            "and the report's URI")
    add_options(parser, COMPARE_OPTIONS, "comparison options")
    parser.add_argument("--comparison-id", default=None, help="id of the comparison (default: a hash of the spec)")
    _output_option(parser)
    parser.add_argument("--input", "--input-uri", dest="input_uri", default=None,
                        help="root of the raw logs; needed with --judge-model")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr (with --judge-model)")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON (every delta, every URI)")


def latest_day(store: Any, option: str) -> dt.date:
    """The newest day landed under ``store`` (its commit record names a ``daily_summary``), for
    ``latest`` in ``option``."""
    # Polars via storage: only for this command
    from evaluation import storage

    landed = storage.read_landed(store)
    days = [day for day in landed.commits if landed.key("daily_summary", day) is not None]
    if not days:
        raise CliError(f"{option} latest: no day has landed under {store.uri('_landed/')}")
    return max(days)


def _cmd_compare(args: argparse.Namespace) -> int:
    # Polars and the comparison: only when comparing
    from evaluation import compare, storage

    store, raw_store = storage.open_stores(args.output_uri, args.input_uri, make_access=args.s3_access)
    args.start_date = args.start_date.resolve(lambda: latest_day(store, "--from"))
    args.end_date = args.end_date.resolve(lambda: latest_day(store, "--to"))
    spec = ComparisonSpec.model_validate(read_options(COMPARE_OPTIONS, option_values(args, COMPARE_OPTIONS)))
    if spec.rejudges and not args.input_uri:
        raise CliError("--judge-model re-judges records from the raw logs: give --input")
    bars = ProgressBars(not args.no_progress)
    try:
        result = compare.run_comparison(store, spec, comparison_id=args.comparison_id, raw_store=raw_store,
                                        api_key=api_key_from_env(spec.api_base), progress=bars.start)
    except compare.ComparisonError as exc:
        print(json.dumps({"status": "failed", "error": str(exc)}, indent=2))
        return 1
    finally:
        bars.close()
    if result.get("days_without_data"):
        missing = result["days_without_data"]
        print(f"python -m evaluation compare: warning: {len(missing)} of the {len(missing) + len(result['days'])} days "
              f"from {spec.start_date} to {spec.end_date} have no data ({', '.join(missing)}); compared "
              f"{', '.join(result['days']) or 'none'}", file=sys.stderr)
    if args.json:
        print(json.dumps({"status": "success", **result}, indent=2, default=str))
    else:
        print("\n".join(comparison_lines(result)))
    return 0


def _sql_parser(sub: Any) -> None:
    # Polars via sql: only for this command
    from evaluation.storage.sql import FORMATS, TABLES

    parser = sub.add_parser("sql", help="run SQL over the landed tables (Polars SQL)",
                            description=f"Tables: {', '.join(TABLES)} (the daily ones and failed_rejects with their "
                                        "dt column). Simple dt predicates prune the partitions read.")
    parser.add_argument("query", help="the SQL query")
    _output_option(parser)
    parser.add_argument("--format", choices=(*FORMATS, "parquet"), default="table",
                        help="table (numbers rounded, cells cut to 40 characters, one block per row when too "
                             "wide), markdown (numbers rounded), or at full precision csv, json or parquet (with --to)")
    parser.add_argument("--to", dest="to", default=None, help="write the result to this file (parquet needs it)")
    parser.add_argument("--max-rows", type=bounded(int, 1), default=50, help="rows shown by --format table")


def _cmd_sql(args: argparse.Namespace) -> int:
    # Polars via sql and storage: only for this command
    from evaluation import storage
    from evaluation.storage import sql

    if args.format == "parquet" and not args.to:
        raise CliError("--format parquet needs --to PATH")
    store = storage.open_stores(args.output_uri, make_access=args.s3_access)[0]
    try:
        result = sql.run_sql(store, args.query)
    except sql.SqlError as exc:
        print(f"python -m evaluation sql: error: {exc}", file=sys.stderr)
        return 1
    if args.format == "parquet":
        result.write_parquet(args.to, compression=storage.PARQUET_COMPRESSION)
    elif args.to:
        Path(args.to).write_text(sql.render(result, args.format, max_rows=result.height), encoding="utf-8")
    else:
        sys.stdout.write(sql.render(result, args.format, max_rows=args.max_rows))
    if args.to:
        print(f"{result.height} rows written to {args.to}", file=sys.stderr)
    return 0


def _report_parser(sub: Any) -> None:
    parser = sub.add_parser("report", help="build a day's HTML report and summary.json and print the page's URI")
    parser.add_argument("--date", required=True, type=day_expression,
                        help="the day (dt) to report on: YYYY-MM-DD, latest (the newest landed day) or latest-N")
    _output_option(parser)
    parser.add_argument("--report-output", default=None,
                        help="directory or s3:// URI for index.html and summary.json (default: reports/dt=D/ under --output)")
    parser.add_argument("--history-days", type=int, default=30, help="days of daily_summary shown in the trends")
    parser.add_argument("--alpha", type=float, default=0.05, help="flag when the adjusted p-value is below this")
    parser.add_argument("--p-adjust", choices=("holm", "bh"), default="holm",
                        help="multiplicity adjustment across the day's tests: holm or bh (Benjamini-Hochberg)")
    parser.add_argument("--min-rate-effect", type=float, default=0.05,
                        help="smallest change of a pass/borderline/fail rate that can flag (0.05: 5 percentage points)")
    parser.add_argument("--min-metric-effect", type=float, default=0.05,
                        help="smallest change of a metric mean (score, faithfulness, ...) that can flag")
    parser.add_argument("--prior-day-sd", type=float, default=0.03,
                        help="prior day-to-day sd of a measure (0.03: 3 pp of a rate), shrunk with the model's own days")
    parser.add_argument("--useful-drop", type=float, default=0.20,
                        help="a model whose day cannot catch a pass-rate drop this large is 'too few records to monitor'")
    parser.add_argument("--accept-baseline", action="append", default=[], metavar="MODEL=YYYY-MM-DD",
                        help="accept MODEL's level from that day on as its baseline (ends its regression); repeatable "
                        "or comma-separated (default $EVALUATION_ACCEPT_BASELINE, the run option's variable)")


def accepted_baselines(items: list[str]) -> dict[str, dt.date]:
    """``--accept-baseline MODEL=YYYY-MM-DD`` values as ``{model: day}``; none given: the run
    option's variable ``$EVALUATION_ACCEPT_BASELINE`` (:func:`evaluation.contract.options.env_name`)."""
    text = ",".join(items) if items else os.environ.get(env_name("accept_baseline"), "")
    accepted = parse_accepted_baselines(text)  # a MappingError is a usage error: exit 2 naming the flag
    assert isinstance(accepted, dict)
    return accepted


def _cmd_report(args: argparse.Namespace) -> int:
    # Polars via the report: only for this command
    from evaluation import report, storage

    # a bad value is a pydantic error, which the command line's dispatch names by option
    policy = report.AlertPolicy(alpha=args.alpha, p_adjust=args.p_adjust, min_rate_effect=args.min_rate_effect,
                                min_metric_effect=args.min_metric_effect, prior_day_sd=args.prior_day_sd,
                                useful_drop=args.useful_drop, accept_baseline=accepted_baselines(args.accept_baseline))
    store, target = storage.open_stores(args.output_uri, args.report_output, make_access=args.s3_access)
    day = args.date.resolve(lambda: latest_day(store, "--date"))
    try:
        uris = report.write_daily_report(store, day, history_days=args.history_days, report_store=target,
                                         policy=policy)
    except report.ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if uris.get("replaced_fuller"):
        print(f"python -m evaluation report: warning: {uris['replaced_fuller']}", file=sys.stderr)
    print(uris["html"])
    return 0


def _gc_parser(sub: Any) -> None:
    parser = sub.add_parser("gc", help="delete working data past its retention (a dry run unless --apply)",
                            description="Lists the working data (_work/, _failed/, the ledger and claims, and "
                                        "objects of the day tables that no day's commit names) that the "
                                        "retention lets go, with objects and bytes; deletes exactly those objects "
                                        "with --apply. What a day's commit names, reports and runs are never deleted.")
    _output_option(parser)
    add_options(parser, RETENTION_OPTIONS, "retention options")
    parser.add_argument("--apply", action="store_true", help="delete what is listed (default: only list it)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON instead of lines")


def _cmd_gc(args: argparse.Namespace) -> int:
    # Polars via retention and storage: only for this command
    from evaluation import storage
    from evaluation.storage import retention

    policy = Retention.model_validate(read_options(RETENTION_OPTIONS, option_values(args, RETENTION_OPTIONS)))
    store = storage.open_stores(args.output_uri, make_access=args.s3_access)[0]
    plan = retention.collect(store, policy, now=dt.datetime.now(dt.UTC))
    if args.apply:
        retention.apply(store, plan)
    if args.json:
        print(json.dumps({**plan.to_dict(), "applied": args.apply}, indent=2))
    else:
        print("\n".join(retention.describe(plan, applied=args.apply)))
    return 0


def _s3_access(profile: str | None, endpoint_url: str | None) -> Any:
    """S3 for the commands, made when a URI is on S3 (local directories need no AWS setup)."""
    # Polars via storage: only for this command
    from evaluation import storage

    return storage.s3_access(profile=profile, endpoint_url=endpoint_url)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m evaluation``."""
    parser = Parser(prog="python -m evaluation", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO; tracebacks of failures")
    parser.add_argument("--aws-profile", default=None,
                        help="AWS profile for S3 (default: boto3's chain: AWS_PROFILE, the environment's keys, the instance role)")
    parser.add_argument("--endpoint-url", default=None,
                        help="S3 endpoint of an S3-compatible store (default: AWS_ENDPOINT_URL, else AWS's own)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _run_parser(sub)
    _plan_parser(sub)
    _compare_parser(sub)
    _sql_parser(sub)
    _report_parser(sub)
    _gc_parser(sub)
    calibration_cli.add_parser(sub)
    review_cli.add_parser(sub)
    sample_logs.add_parser(sub)
    for name in sub.choices:  # -v after the command works too (SUPPRESS: it does not reset one given before)
        parser.subcommand(name).add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                             help="log at INFO; tracebacks of failures")
    args = parser.parse_args(argv)
    args.s3_access = functools.partial(_s3_access, args.aws_profile, args.endpoint_url)
    route_third_party_logs(args.verbose)
    commands = {"run": _cmd_run, "plan": _cmd_plan, "compare": _cmd_compare, "sql": _cmd_sql, "report": _cmd_report,
                "gc": _cmd_gc, "calibrate": calibration_cli.command, "generate": sample_logs.command,
                "review": review_cli.command}
    return dispatch(parser, commands[args.command], args, verbose=args.verbose)
