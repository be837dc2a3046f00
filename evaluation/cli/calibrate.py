"""``python -m evaluation calibrate``: judge a golden set and land the calibration (CONTRACT §6)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from evaluation.cli.support import CliError, ProgressBars, add_options, api_key_from_env, option_values
from evaluation.contract.calibration import CalibrationError, CalibrationSpec
from evaluation.contract.options import CALIBRATE_OPTIONS, read_options

#: The source checkout this package runs from.
REPOSITORY = Path(__file__).resolve().parents[2]


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "calibrate", help="judge a golden set and measure the judges' agreement with its labels",
        description="Judge a golden set (docs/golden-sets.md) and land calibrations/calibration_id=<id>/ "
                    "(calibration.parquet, report.html, the judged rows); prints a JSON summary of the figures.")
    add_options(parser, CALIBRATE_OPTIONS, "calibration options")
    parser.add_argument("--output", "--output-uri", dest="output_uri", default=None,
                        help="root of the landed tables (default: $EVALUATION_OUTPUT_URI, else the golden set's "
                             "parent folder, so that calibrations/ lands beside the golden sets; required for the "
                             "sets shipped in the repository)")
    parser.add_argument("--calibration-id", default=None, help="id of the calibration (default: a hash of the spec)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _parent(uri: str) -> str:
    """The folder holding a golden set's folder (where its calibrations land by default)."""
    if uri.startswith("s3://"):
        return uri.rsplit("/", 1)[0] if uri.count("/") > 2 else uri
    return str(Path(uri.removeprefix("file://")).resolve().parent)


def _in_repository(uri: str) -> bool:
    """Whether ``uri`` is a folder of this source checkout (the shipped golden sets live there)."""
    if uri.startswith("s3://"):
        return False
    return Path(uri).resolve().is_relative_to(REPOSITORY)


def command(args: argparse.Namespace) -> int:
    """Run the calibration; print its JSON summary (exit 1 with a JSON error when it cannot run)."""
    # the job: Polars, Great Expectations and the stages, only when calibrating
    from evaluation import stages, storage
    from evaluation.calibration.run import run_calibration

    spec = CalibrationSpec.model_validate(read_options(CALIBRATE_OPTIONS, option_values(args, CALIBRATE_OPTIONS)))
    output_uri = args.output_uri or os.environ.get("EVALUATION_OUTPUT_URI") or _parent(spec.golden_uri)
    if not (args.output_uri or os.environ.get("EVALUATION_OUTPUT_URI")) and _in_repository(output_uri):
        raise CliError(f"--output is required: the golden set's folder {output_uri} is inside the repository, where "
                       "calibrations/ and _ledger/ would land (give --output DIR or set EVALUATION_OUTPUT_URI)")
    store, golden = storage.open_stores(output_uri, spec.golden_uri, make_access=args.s3_access)
    bars = ProgressBars(not args.no_progress)
    try:
        result = run_calibration(store, golden, spec, calibration=args.calibration_id,
                                 api_key=api_key_from_env(spec.api_base), progress=bars.start)
    except (CalibrationError, stages.JudgeUnreachable) as exc:
        print(json.dumps({"status": "failed", "set": spec.set_name, "error": str(exc)}, indent=2))
        return 1
    finally:
        bars.close()
    print(json.dumps({"status": "success", **result}, indent=2, default=str))
    return 0
