"""``python -m evaluation``: the pipeline's stages by hand, with no scheduler.

* ``run``: evaluate one day (ingest, validate, judge, score, land) and print a JSON summary
  with the counts of CONTRACT §4.
* ``plan``: read and validate a day and print, without any judge call, its records, rejects,
  judge calls, tokens, cost (online and batch) and judging time (``run --dry-run`` does the same).
* ``compare``: compare models over a date range (landed scores, or a re-judged sample), land
  ``comparisons/`` and a report page, print a JSON summary of the deltas.
* ``sql``: run SQL over the landed tables (Polars SQL, dt partitions pruned) and print or save it.
* ``report``: build a day's HTML report and ``summary.json`` from the landed tables, print the page's URI.
* ``gc``: apply the retention of working data (``_work/``, ``_failed/``, the ledger); a dry run
  unless ``--apply``.
* ``calibrate``: judge a golden set (human-labelled records) and land the judges' agreement with the
  labels under ``calibrations/`` with a page; print a JSON summary of the figures.
* ``generate``: write a realistic day of sample logs (own or openai-chat records) to try ``run`` on.

S3 is reached with boto3's own chain (the environment's keys, ``AWS_PROFILE`` or ``--aws-profile``,
a web identity, the instance role) at ``--endpoint-url`` (default ``AWS_ENDPOINT_URL``, else AWS).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from evaluation import sample_logs
from evaluation.calibration import cli as calibration_cli
from evaluation.cli_support import (
    KEY_HINT,
    CliError,
    Parser,
    api_key_from_env,
    bounded,
    day_expression,
    dispatch,
    iso_date,
    judge_names,
    route_third_party_logs,
)
from evaluation.options import OPTIONS, Option, build_config

logger = logging.getLogger("evaluation")



def _option_help(option: Option) -> str:
    """An option's help with its default, or the environment variable it falls back to."""
    text = option.help.split(" Empty: ")[0].split("; empty for ")[0].rstrip(".") + "."
    if option.env:
        fallback = "" if option.fallback is None else f", else {option.fallback:g}" if isinstance(
            option.fallback, float) else f", else {option.fallback}"
        return f"{text} (default: ${option.env}{fallback})"
    if option.kind == "boolean":
        return f"{text} (default: {'on' if option.default else 'off'})"
    shown = ",".join(option.default) if option.kind == "judges" else "none" if option.default in (None, "") \
        else option.default
    return f"{text} (default: {shown})"


def _add_option(parser: argparse.ArgumentParser, option: Option) -> None:
    if option.kind == "boolean":
        parser.add_argument(option.flag, dest=option.name, action=argparse.BooleanOptionalAction,
                            default=None, help=_option_help(option))
        return
    kinds: dict[str, Any] = {"integer": bounded(int, option.minimum, option.maximum),
                             "number": bounded(float, option.minimum, option.maximum),
                             "string": str, "judges": judge_names}
    uri = option.name in ("input_uri", "output_uri")
    parser.add_argument(
        option.flag.removesuffix("-uri"),  # --input / --output, as CONTRACT §6 spells them
        *([option.flag] if uri else []),
        dest=option.name,
        type=kinds[option.kind],
        default=None,
        metavar="URI" if uri else None,
        help=_option_help(option),
    )


def _run_parser(sub: Any) -> None:
    parser = sub.add_parser("run", help="evaluate one day and print a JSON summary")
    parser.add_argument("--date", required=True, type=iso_date, help="the day (dt) to evaluate, YYYY-MM-DD")
    parser.add_argument("--run-id", default=None, help="id of this run (default: cli-<date>-<time>)")
    for option in OPTIONS:
        _add_option(parser, option)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar and no stage lines on stderr")


def _plan_parser(sub: Any) -> None:
    parser = sub.add_parser("plan", help="size a day before paying: calls, tokens, cost and time, no judge call")
    parser.add_argument("--date", required=True, type=iso_date, help="the day (dt) to plan, YYYY-MM-DD")
    for option in OPTIONS:
        if option.name != "dry_run":
            _add_option(parser, option)
    parser.add_argument("--pool-slots", type=int, default=1,
                        help="chunks judged at once (the llm_judge pool's slots; default 1, as `run` judges them)")
    parser.add_argument("--latency-s", type=float, default=None,
                        help="seconds one judge call takes (default 2, 0 for the offline judge)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")


def _print_plan(cfg: Any, s3_access: Callable[[], Any], *, pool_slots: int = 1, latency_s: float | None = None,
                as_json: bool = False) -> int:
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
    values = {o.name: getattr(args, o.name) for o in OPTIONS if getattr(args, o.name, None) is not None}
    cfg = build_config({**values, "dry_run": True}, date=args.date, run_id=f"plan-{args.date.isoformat()}",
                       trigger="cli")
    if args.pool_slots < 1:
        raise ValueError("--pool-slots must be at least 1")
    return _print_plan(cfg, args.s3_access, pool_slots=args.pool_slots, latency_s=args.latency_s, as_json=args.json)


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
                f"{figures['chunks']} chunks; estimate {estimate.get('prompt_tokens', 0):,} prompt tokens, "
                f"${estimate.get('cost_usd', 0.0):.2f}"
                + (f" (batch ${estimate['batch_cost_usd']:.2f})" if estimate.get("batch_cost_usd") is not None else "")
                + f" {seconds}")
    if stage == "land":
        statuses = ", ".join(f"{n:,} {s}" for s, n in figures["statuses"].items() if n)
        return (f"{day} landed {figures['rows']:,} rows ({statuses or 'none'}); {figures['calls_made']:,} calls made, "
                f"{figures['calls_reused']:,} reused, ${figures['cost_usd']:.4f} {seconds}")
    return f"{day} report: {figures['html']} {seconds}"


def _cmd_run(args: argparse.Namespace) -> int:
    from evaluation import stages, storage
    from evaluation.day import run_day

    values = {o.name: getattr(args, o.name) for o in OPTIONS if getattr(args, o.name) is not None}
    for option in OPTIONS:
        if option.name in ("input_uri", "output_uri") and not values.get(option.name) and not os.environ.get(
                option.env or ""):
            raise CliError(f"{option.flag.removesuffix('-uri')} is required (or set {option.env})")
    run_id = args.run_id or f"cli-{args.date.isoformat()}-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
    cfg = build_config(values, date=args.date, run_id=run_id, trigger="cli")
    if cfg.dry_run:  # stop after planning: the plan, as `plan` prints it
        return _print_plan(cfg, args.s3_access)
    stores = stages.Stores(*storage.open_stores(cfg.input_uri, cfg.output_uri, make_access=args.s3_access))
    bar: Any = None

    def planned(total: int) -> None:
        nonlocal bar
        if not args.no_progress:
            from tqdm import tqdm

            bar = tqdm(total=total, unit="judgement", desc=f"judging {cfg.date}", file=sys.stderr, dynamic_ncols=True)

    def progress(count: int) -> None:
        if bar is not None:
            bar.update(count)

    def stage(name: str, figures: dict[str, Any]) -> None:
        nonlocal bar
        if bar is not None:  # the judging is over
            bar.close()
            bar = None
        if not args.no_progress:
            print(stage_line(cfg.date, name, figures), file=sys.stderr, flush=True)

    try:
        waited = None
        if {"completion_marker", "quiet_period_s"} & set(values):  # the CLI waits only when asked to
            from evaluation.wait import wait_for_day

            waited = wait_for_day(cfg, stores, on_wait=None if args.no_progress else
                                  lambda line: print(f"{cfg.date} wait: {line}", file=sys.stderr, flush=True))
        result = run_day(
            cfg,
            stores,
            api_key=api_key_from_env(cfg.api_base),
            key_hint=KEY_HINT,
            on_wait=None if args.no_progress else lambda line: print(line, file=sys.stderr, flush=True),
            progress=progress,
            on_planned=planned,
            on_stage=stage,
            waited_s=waited,
        )
    except (stages.RunFailed, stages.JudgeUnreachable) as exc:
        if bar is not None:
            bar.close()
        failed: dict[str, Any] = {"status": "failed", "run_id": run_id, "dt": cfg.date.isoformat(), "error": str(exc)}
        if getattr(exc, "reject_reasons", None):
            failed["rejects_by_reason"] = [r.model_dump() for r in exc.reject_reasons]  # type: ignore[union-attr]
        print(json.dumps(failed, indent=2))
        return 1
    print(json.dumps({"status": "success", **result.model_dump(mode="json")}, indent=2))
    return 0


def _compare_parser(sub: Any) -> None:
    parser = sub.add_parser("compare", help="compare models over a date range and print a JSON summary")
    parser.add_argument("--from", dest="start_date", required=True, type=day_expression,
                        help="first day (dt): YYYY-MM-DD, latest (the newest landed day) or latest-N")
    parser.add_argument("--to", dest="end_date", required=True, type=day_expression,
                        help="last day (dt): YYYY-MM-DD, latest or latest-N")
    parser.add_argument("--models", required=True, help="models to compare, comma-separated (at least two)")
    parser.add_argument("--baseline", default=None, help="the model the others are compared to (default: the first)")
    parser.add_argument("--judges", type=judge_names, default=None,
                        help="judges to compare, comma-separated (default: all)")
    parser.add_argument("--sample", dest="sample_per_model", type=int, default=None,
                        help="at most this many records per model, a seeded sample (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample, bootstrap and permutations")
    parser.add_argument("--bootstrap", type=int, default=None, help="bootstrap resamples (default 2000)")
    parser.add_argument("--judge-model", default=None,
                        help="re-judge the sample with this litellm model (default: compare the landed scores)")
    parser.add_argument("--api-base", default=None, help="base URL of an OpenAI-compatible judge server")
    parser.add_argument("--concurrency", type=int, default=None, help="judge calls in flight when re-judging")
    parser.add_argument("--p-adjust", dest="p_adjust", choices=("holm", "bh"), default=None,
                        help="adjustment of the p-values for their number: holm (default) or bh (Benjamini–Hochberg)")
    parser.add_argument("--comparison-id", default=None, help="id of the comparison (default: a hash of the spec)")
    parser.add_argument("--output", "--output-uri", dest="output_uri", required=True,
                        help="root of the landed tables (s3://bucket/prefix or a directory)")
    parser.add_argument("--input", "--input-uri", dest="input_uri", default=None,
                        help="root of the raw logs; needed with --judge-model")


def latest_day(store: Any, option: str) -> dt.date:
    """The newest day landed under ``store`` (its ``daily_summary``), for ``latest`` in ``option``."""
    import polars as pl

    from evaluation import storage

    summary = storage.scan_table(store, "daily_summary")
    newest = None if summary is None else summary.select(pl.col("dt").max()).collect().item()
    if newest is None:
        raise CliError(f"{option} latest: no day has landed under {store.uri('daily_summary/')}")
    return newest  # type: ignore[no-any-return]


def _cmd_compare(args: argparse.Namespace) -> int:
    from evaluation import compare, storage

    store, raw_store = storage.open_stores(args.output_uri, args.input_uri, make_access=args.s3_access)
    args.start_date = args.start_date.resolve(lambda: latest_day(store, "--from"))
    args.end_date = args.end_date.resolve(lambda: latest_day(store, "--to"))
    values = {
        k: getattr(args, k)
        for k in ("start_date", "end_date", "models", "baseline", "judges", "sample_per_model", "seed", "bootstrap",
                  "judge_model", "api_base", "concurrency", "p_adjust")
        if getattr(args, k) is not None
    }
    spec = compare.ComparisonSpec.model_validate(values)
    if spec.judge_model is not None and not args.input_uri:
        raise CliError("--judge-model re-judges records from the raw logs: give --input")
    try:
        result = compare.run_comparison(store, spec, comparison_id=args.comparison_id, raw_store=raw_store,
                                        api_key=api_key_from_env(spec.api_base))
    except compare.ComparisonError as exc:
        print(json.dumps({"status": "failed", "error": str(exc)}, indent=2))
        return 1
    if result.get("days_without_data"):
        missing = result["days_without_data"]
        print(f"python -m evaluation compare: warning: {len(missing)} of the {len(missing) + len(result['days'])} days "
              f"from {spec.start_date} to {spec.end_date} have no data ({', '.join(missing)}); compared "
              f"{', '.join(result['days']) or 'none'}", file=sys.stderr)
    print(json.dumps({"status": "success", **result}, indent=2, default=str))
    return 0


def _sql_parser(sub: Any) -> None:
    from evaluation.sql import FORMATS, TABLES

    parser = sub.add_parser("sql", help="run SQL over the landed tables (Polars SQL)",
                            description=f"Tables: {', '.join(TABLES)} (the daily ones and failed_rejects with their "
                                        "dt column). Simple dt predicates prune the partitions read.")
    parser.add_argument("query", help="the SQL query")
    parser.add_argument("--output", "--output-uri", dest="output_uri", required=True, metavar="URI",
                        help="root of the landed tables (s3://bucket/prefix or a directory)")
    parser.add_argument("--format", choices=(*FORMATS, "parquet"), default="table",
                        help="table (cells cut to 40 characters, one block per row when too wide), csv, json, "
                             "markdown, or parquet (with --to)")
    parser.add_argument("--to", dest="to", default=None, help="write the result to this file (parquet needs it)")
    parser.add_argument("--max-rows", type=bounded(int, 1), default=50, help="rows shown by --format table")


def _cmd_sql(args: argparse.Namespace) -> int:
    from evaluation import sql, storage

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
    else:
        text = sql.render(result, args.format, max_rows=result.height if args.to else args.max_rows)
        if args.to:
            with open(args.to, "w", encoding="utf-8") as handle:
                handle.write(text)
        else:
            sys.stdout.write(text)
    if args.to:
        print(f"{result.height} rows written to {args.to}", file=sys.stderr)
    return 0


def _report_parser(sub: Any) -> None:
    parser = sub.add_parser("report", help="build a day's HTML report and summary.json and print the page's URI")
    parser.add_argument("--date", required=True, type=day_expression,
                        help="the day (dt) to report on: YYYY-MM-DD, latest (the newest landed day) or latest-N")
    parser.add_argument("--output", "--output-uri", dest="output_uri", required=True,
                        help="root of the landed tables (s3://bucket/prefix or a directory)")
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


def _cmd_report(args: argparse.Namespace) -> int:
    from evaluation import report, storage

    # a bad value is a pydantic error, which the command line's dispatch names by option
    policy = report.AlertPolicy(alpha=args.alpha, p_adjust=args.p_adjust, min_rate_effect=args.min_rate_effect,
                                min_metric_effect=args.min_metric_effect)
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
    from evaluation.contract import Retention

    parser = sub.add_parser("gc", help="delete working data past its retention (a dry run unless --apply)",
                            description="Lists the working data (_work/, _failed/, the ledger and claims) that the "
                                        "retention lets go, with objects and bytes; deletes exactly those objects "
                                        "with --apply. Landed tables, reports and runs are never deleted.")
    parser.add_argument("--output", "--output-uri", dest="output_uri", default=os.environ.get("EVALUATION_OUTPUT_URI"),
                        required=not os.environ.get("EVALUATION_OUTPUT_URI"),
                        help="root of the landed tables (s3://bucket/prefix or a directory; default $EVALUATION_OUTPUT_URI)")
    for name, field in Retention.model_fields.items():
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=int, default=field.default,
                            help=f"{(field.description or '').replace('`', '')} (default {field.default})")
    parser.add_argument("--apply", action="store_true", help="delete what is listed (default: only list it)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON instead of lines")


def _cmd_gc(args: argparse.Namespace) -> int:
    from evaluation import contract, retention, storage

    policy = contract.Retention.model_validate({k: getattr(args, k) for k in contract.Retention.model_fields})
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
    sample_logs.add_parser(sub)
    for name in sub.choices:  # -v after the command works too (SUPPRESS: it does not reset one given before)
        parser.subcommand(name).add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                             help="log at INFO; tracebacks of failures")
    args = parser.parse_args(argv)
    args.s3_access = functools.partial(_s3_access, args.aws_profile, args.endpoint_url)
    route_third_party_logs(args.verbose)
    commands = {"run": _cmd_run, "plan": _cmd_plan, "compare": _cmd_compare, "sql": _cmd_sql, "report": _cmd_report,
                "gc": _cmd_gc, "calibrate": calibration_cli.command, "generate": sample_logs.command}
    return dispatch(parser, commands[args.command], args, verbose=args.verbose)
