"""``python -m evaluation generate``: a realistic day of conversation logs to try the pipeline on.

The day is the demo's (:mod:`evaluation.testing.synthetic`): assistants of different quality, retrieved
contexts, citations (some to contexts never retrieved), references, rubrics, and a few planted bad
records (at most 4% of the day), written in any input format the pipeline reads, in that format's
layout (:mod:`evaluation.cli.sample_formats`), with the ``_SUCCESS`` completion marker the demo writes.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from evaluation import storage
from evaluation.cli import sample_formats
from evaluation.cli.support import iso_date
from evaluation.contract.adapters import FORMAT_LAYOUTS
from evaluation.contract.config import comma_list
from evaluation.contract.errors import UsageError
from evaluation.testing import synthetic

#: The completion marker written after the day's objects (as the demo's export does).
MARKER = "_SUCCESS"


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "generate", help="write a realistic day of sample logs to try run on",
        description="Write a generated day of conversation logs under OUTPUT, in the format's shape and "
                    "layout (own and openai-chat: dt=DATE/, two JSONL objects, one gzipped; litellm: DATE/, one "
                    "object per call; otel: year=/month=/day=/hour=/minute=, OTLP JSON), with a _SUCCESS marker, "
                    "and print a JSON summary with the command that evaluates it. Objects of the same names "
                    "are replaced.")
    parser.add_argument("--date", required=True, type=iso_date, help="the day (dt) to write, YYYY-MM-DD")
    parser.add_argument("--output", "--output-uri", dest="output_uri", required=True,
                        help="root to write under (a directory or s3://bucket/prefix): the run's --input")
    parser.add_argument("--records", type=int, default=300, help="valid records to write (default 300)")
    parser.add_argument("--format", dest="input_format", choices=sample_formats.FORMATS, default="own",
                        help="shape of the records: own (the contract's fields), openai-chat, litellm (LiteLLM's S3 "
                             "logging) or otel (OpenTelemetry traces, OTLP JSON) (default own)")
    parser.add_argument("--models", default=None,
                        help="models the records are spread over, comma-separated (default: "
                             f"{','.join(synthetic.MODELS)}); the first behaves as {synthetic.MODELS[0]}, "
                             "the second as the better one, the third as the weaker one")
    parser.add_argument("--seed", type=int, default=7, help="same seed and day, same records (default 7)")
    parser.add_argument("--no-bad", dest="bad", action="store_false",
                        help="leave out the planted bad records (rejected by validation; at most 4%% of the day)")


def command(args: argparse.Namespace) -> int:
    """Write the day; print where it went and how to evaluate it."""
    if args.records < 1:
        raise UsageError(f"--records must be at least 1, got {args.records}")
    models: list[str] = comma_list(args.models) if args.models is not None else list(synthetic.MODELS)  # type: ignore[assignment]
    if not models:
        raise UsageError("--models names no model")
    store = storage.open_stores(args.output_uri, make_access=args.s3_access)[0]
    lines = synthetic.generate_day(args.date, args.records, seed=args.seed, bad=False, models=models)
    planted = sample_formats.planted_lines(args.date, lines, args.input_format) if args.bad else []
    objects = sample_formats.day_objects(args.date, [*lines, *planted], args.input_format)
    for key, data in objects.items():
        store.write_bytes(key, data)
    marker = f"{storage.raw_prefix(args.date, FORMAT_LAYOUTS[args.input_format])}{MARKER}"
    store.write_bytes(marker, b"")
    root = args.output_uri.rstrip("/")
    run = f"python -m evaluation run --date {args.date} --input {root} --output {root}-curated"
    if args.input_format != "own":
        run += f" --input-format {args.input_format}"
    print(json.dumps({
        "status": "success",
        "dt": args.date.isoformat(),
        "input_format": args.input_format,
        "records": args.records,
        "planted_bad_records": len(planted),
        "models": models,
        "objects": [store.uri(key) for key in [*objects, marker]],
        "run": run,
    }, indent=2))
    print(f"evaluate it with: {run}", file=sys.stderr)
    return 0
