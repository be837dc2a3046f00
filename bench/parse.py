"""Item 15 of ``make bench``: how long each DAG file takes to parse, as the dag-processor parses it.

The dag-processor parses every DAG file again every ``min_file_process_interval`` (30 s by
default), each in a process of its own that has Airflow imported and nothing of the file's own
imports; a file that imports heavy libraries at the top (polars, litellm, Great Expectations) pays
them on every parse (``tests/dags`` checks that none does). Each file is parsed here in a fresh
child that has imported Airflow first: the wall time of the first parse (the file's own imports
included) and the median of the next ``repeats`` (what the parse costs with those imports cached).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.common import REPO, child_main

DAGS = REPO / "dags"


def parse(params: dict[str, Any]) -> dict[str, Any]:
    # Airflow: imported before the clock starts, as the dag-processor has it imported
    from airflow.dag_processing.dagbag import DagBag

    path = DAGS / params["file"]
    times = []
    for _ in range(1 + params["repeats"]):
        started = time.perf_counter()
        bag = DagBag(dag_folder=str(path))
        times.append(time.perf_counter() - started)
        if bag.import_errors:
            raise RuntimeError(f"{path.name} did not parse: {bag.import_errors}")
    return {"file": path.name, "dags": sorted(bag.dag_ids), "first_s": round(times[0], 3),
            "again_s": round(statistics.median(times[1:]), 3) if times[1:] else None}


if __name__ == "__main__":
    child_main({"parse": parse})
