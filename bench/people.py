"""Bench item 13: prediction-powered rates against judge-only ones, on simulated days whose judge
is biased by a known amount (:mod:`evaluation.testing.biased`): the coverage of the true rate by
each 95% interval, and its width, at 50, 200 and 1,000 labels."""

from __future__ import annotations

from typing import Any

from bench.common import child_main
from evaluation.testing.biased import coverage


def intervals(params: dict[str, Any]) -> dict[str, Any]:
    rows = [coverage(labels=labels, false_pass=false_pass, records=params["records"], days=params["days"]).model_dump()
            | {"false_pass": false_pass}
            for false_pass in params["false_pass"] for labels in params["labels"]]
    return {"rows": rows, "records": params["records"], "days": params["days"]}


if __name__ == "__main__":
    child_main({"intervals": intervals})
