"""``python -m evaluation review``: the review queue from the command line (CONTRACT §5, docs/people.md).

* ``review queue --date D``: queue the day's records for people (lands ``review_queue/``);
* ``review export --date D --file F.jsonl|.parquet``: the day's queued records not labelled yet,
  with their texts and empty answer columns, for people without Label Studio;
* ``review import --file F``: land a filled-in export's answers in ``human_labels``;
* ``review send [--date D]`` / ``review pull``: the Label Studio round trip, the server and token
  from ``LABEL_STUDIO_URL`` and ``LABEL_STUDIO_API_KEY``;
* ``review calibrate --date D``: per judge model, calibrate the judges on the labels of the
  ``labels_days`` days ending at D (lands ``calibrations/``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from evaluation.cli.support import CliError, add_options, option_values
from evaluation.contract.options import options, read_options
from evaluation.contract.review import ReviewSpec

#: The flags of ``review``: every field of the spec.
REVIEW_OPTIONS = options(ReviewSpec)
ACTIONS = ("queue", "export", "import", "send", "pull", "calibrate")


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("review", help="queue records for people, send them to Label Studio or export them, "
                                           "and land their labels in human_labels",
                            description=__doc__)
    parser.add_argument("action", choices=ACTIONS, help="what to do (see docs/people.md)")
    parser.add_argument("--date", type=dt.date.fromisoformat, default=None, help="the records' day (YYYY-MM-DD)")
    parser.add_argument("--file", type=Path, default=None, help="the .jsonl or .parquet file exported or imported")
    parser.add_argument("--queue-id", default="manual", help="id of the queue (with the day, seeds the draw)")
    add_options(parser, REVIEW_OPTIONS)


def _needs(args: argparse.Namespace, *names: str) -> None:
    for name in names:
        if getattr(args, name) is None:
            raise CliError(f"review {args.action} needs --{name}")


def _studio() -> Any:
    from evaluation.stages.labelstudio import LabelStudio  # httpx: only for the round trip

    url, token = os.environ.get("LABEL_STUDIO_URL"), os.environ.get("LABEL_STUDIO_API_KEY")
    if not url or not token:
        raise CliError("review send and pull need LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY (a personal access "
                       "token) in the environment")
    return LabelStudio(url, token)


def command(args: argparse.Namespace) -> int:
    """Do the review action; print its JSON result."""
    # the jobs: Polars, httpx and the stages, only when reviewing
    from evaluation import storage
    from evaluation.stages import labelstudio
    from evaluation.stages import review as job

    spec = ReviewSpec.model_validate(read_options(REVIEW_OPTIONS, option_values(args, REVIEW_OPTIONS)))
    if not spec.output_uri:
        raise CliError("--output is required (or set EVALUATION_OUTPUT_URI)")
    store, raw = storage.open_stores(spec.output_uri, spec.input_uri or None, make_access=args.s3_access)
    result: Any
    if args.action == "queue":
        _needs(args, "date")
        result = job.queue_day(spec, store, args.date, args.queue_id).model_dump(mode="json")
    elif args.action == "import":
        _needs(args, "file")
        result = job.import_labels(store, args.file).model_dump()
    elif args.action == "calibrate":
        _needs(args, "date")
        from evaluation.calibration.people import calibrate_all  # the calibration's statistics: only here
        at = dt.datetime.combine(args.date, dt.time(), tzinfo=dt.UTC)
        result = {"calibrations": [c.model_dump(mode="json") for c in calibrate_all(store, spec, args.date, at)]}
    elif args.action == "pull":
        result = labelstudio.pull_labels(spec, store, _studio()).model_dump()
    else:
        if raw is None:
            raise CliError(f"review {args.action} needs --input (or EVALUATION_INPUT_URI): the records' texts are read there")
        if args.action == "export":
            _needs(args, "date", "file")
            result = {"exported": job.export_queue(spec, store, raw, args.date, args.file), "file": str(args.file)}
        else:
            result = labelstudio.send_queue(spec, store, raw, _studio(), args.date).model_dump()
    print(json.dumps({"status": "success", "action": args.action, **result}, indent=2, default=str))
    return 0
