"""``python -m evaluation``: the pipeline's stages by hand, with no scheduler.

* ``run``: evaluate one day (ingest, validate, judge, score, land) and print a JSON summary
  with the counts of CONTRACT §4.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
from typing import Any

from evaluation.options import OPTIONS, Option, build_config

logger = logging.getLogger("evaluation")

#: Environment variables searched, in order, for the judge's API key (litellm also reads the
#: providers' own, such as OPENAI_API_KEY or ANTHROPIC_API_KEY, by itself).
API_KEY_ENV = ("EVALUATION_JUDGE_API_KEY", "LLM_API_KEY")


def _add_option(parser: argparse.ArgumentParser, option: Option) -> None:
    if option.kind == "boolean":
        parser.add_argument(option.flag, dest=option.name, action=argparse.BooleanOptionalAction,
                            default=None, help=option.help)
        return
    kinds: dict[str, Any] = {"integer": int, "number": float, "string": str, "judges": str}
    required = option.name in ("input_uri", "output_uri") and not option.default
    parser.add_argument(
        option.flag.replace("_uri", ""),  # --input / --output, as CONTRACT §6 spells them
        *([option.flag] if option.name in ("input_uri", "output_uri") else []),
        dest=option.name,
        type=kinds[option.kind],
        default=None,
        required=required,
        help=f"{option.help} (default: {','.join(option.default) if option.kind == 'judges' else option.default!r})",
    )


def _run_parser(sub: Any) -> None:
    parser = sub.add_parser("run", help="evaluate one day and print a JSON summary")
    parser.add_argument("--date", required=True, type=dt.date.fromisoformat, help="the day (dt) to evaluate")
    parser.add_argument("--run-id", default=None, help="id of this run (default: cli-<date>-<time>)")
    for option in OPTIONS:
        _add_option(parser, option)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def api_key_from_env(cfg_api_base: str | None) -> str | None:
    """The judge's key from the environment; a placeholder for a keyless OpenAI-compatible server."""
    for name in API_KEY_ENV:
        if os.environ.get(name):
            return os.environ[name]
    if cfg_api_base and not os.environ.get("OPENAI_API_KEY"):
        return "EMPTY"  # vLLM / Ollama style servers take any key, but the client wants one
    return None


def _cmd_run(args: argparse.Namespace) -> int:
    from evaluation import pipeline

    values = {o.name: getattr(args, o.name) for o in OPTIONS if getattr(args, o.name) is not None}
    run_id = args.run_id or f"cli-{args.date.isoformat()}-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
    cfg = build_config(values, date=args.date, run_id=run_id, trigger="cli")
    stores = pipeline.Stores.open(cfg)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=0, unit="judgement", desc=f"judging {cfg.date}", file=sys.stderr, dynamic_ncols=True)

    def planned(total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.refresh()

    try:
        result = pipeline.run_day(
            cfg,
            stores,
            api_key=api_key_from_env(cfg.api_base),
            progress=bar.update if bar is not None else None,
            on_planned=planned,
        )
    except pipeline.RunFailed as exc:
        if bar is not None:
            bar.close()
        print(json.dumps({"status": "failed", "run_id": run_id, "dt": cfg.date.isoformat(), "error": str(exc)}, indent=2))
        return 1
    if bar is not None:
        bar.close()
    print(json.dumps({"status": "success", **result}, indent=2, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m evaluation``."""
    parser = argparse.ArgumentParser(prog="python -m evaluation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    commands = {"run": _cmd_run}
    try:
        return commands[args.command](args)
    except ValueError as exc:  # a bad option value: say what, not a stack trace
        parser.error(str(exc))
        return 2
