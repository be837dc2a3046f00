"""The review round trip through a real Label Studio (pinned in requirements-labelstudio.txt, in its
own virtualenv, on loopback with its own SQLite): the project is created, a day's queue sent, the
tasks annotated through its API as an annotator's browser does, the annotations pulled into
``human_labels`` exactly once across re-runs, and the report shows them.

The server and its personal access token come from Label Studio itself: it starts with
``LABEL_STUDIO_USERNAME`` / ``LABEL_STUDIO_PASSWORD``, the user logs in as the browser does, and
creates a personal access token (legacy tokens are disabled by default in 1.23).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import polars as pl
import pytest

from evaluation import storage
from evaluation.cli.day import run_day
from evaluation.contract.config import RunConfig
from evaluation.contract.review import ReviewSpec
from evaluation.report import build_daily_report
from evaluation.stages import Stores
from evaluation.stages.labelstudio import LabelStudio, pull_labels, send_queue
from evaluation.stages.review import queue_day
from evaluation.storage.labels import read_labels
from evaluation.testing import synthetic

pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parents[2]
LABEL_STUDIO = REPO / ".venv-labelstudio" / "bin" / "label-studio"
USER, PASSWORD = "reviewer@example.com", "review-pass-2026"
#: Waiting for Label Studio to migrate its database and serve (not an assertion about speed).
START_TIMEOUT_S = 900.0
DAY = dt.date(2026, 3, 2)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_serving(url: str, process: subprocess.Popen[bytes], log: Path) -> float:
    started = time.monotonic()
    while time.monotonic() - started < START_TIMEOUT_S:
        if process.poll() is not None:
            raise AssertionError(f"Label Studio exited {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise AssertionError(f"Label Studio did not serve within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def personal_access_token(url: str) -> str:
    """Log in as the browser does (Django's form and CSRF cookie), then create a personal access token."""
    with httpx.Client(base_url=url, follow_redirects=True, timeout=60) as http:
        http.get("/user/login/")
        reply = http.post("/user/login/", data={"email": USER, "password": PASSWORD,
                                                "csrfmiddlewaretoken": http.cookies["csrftoken"]},
                          headers={"Referer": f"{url}/user/login/"})
        assert reply.status_code == 200 and "sessionid" in http.cookies, reply.text[-500:]
        reply = http.post("/api/token/", headers={"X-CSRFToken": http.cookies["csrftoken"], "Referer": f"{url}/"})
        assert reply.status_code == 201, reply.text
        return str(reply.json()["token"])


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    if not LABEL_STUDIO.exists():
        pytest.skip(f"{LABEL_STUDIO} is missing: `make labelstudio` installs it")
    folder = tmp_path_factory.mktemp("label-studio")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "HOST"}
    env.update(LABEL_STUDIO_USERNAME=USER, LABEL_STUDIO_PASSWORD=PASSWORD, LABEL_STUDIO_BASE_DATA_DIR=str(folder),
               LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK="true")
    log = folder / "label-studio.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(LABEL_STUDIO), "start", "--no-browser", "--host", "127.0.0.1", "--port", str(port),
             "--data-dir", str(folder / "data")],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        took = _wait_until_serving(url, process, log)
        print(f"Label Studio served after {took:.0f} s")
        yield url, personal_access_token(url)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _annotate(studio: LabelStudio, task_id: int, verdict: str) -> None:
    """Submit an annotation the way the labelling interface does."""
    def choice(name: str, value: str) -> dict[str, object]:
        return {"from_name": name, "to_name": "answer", "type": "choices", "value": {"choices": [value]}}

    result = [choice("supported", "partly"), choice("answers", "yes"), choice("verdict", verdict),
              {"from_name": "note", "to_name": "answer", "type": "textarea", "value": {"text": ["checked"]}}]
    studio.request("POST", f"/api/tasks/{task_id}/annotations/", "annotate",
                   json={"result": result, "was_cancelled": False, "lead_time": 12.5})


@pytest.mark.timeout(2400)  # Label Studio migrates its SQLite at start: minutes on a loaded machine
def test_a_queue_round_trips_through_label_studio_and_lands_once(tmp_path: Path,
                                                                 label_studio: tuple[str, str]) -> None:
    url, token = label_studio
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 40, bad=False)
    cfg = RunConfig(date=DAY, input_uri=str(tmp_path / "raw"), output_uri=str(tmp_path / "out"), run_id="r1",
                    judges=["rag", "masis"])
    stores = Stores.open(cfg)
    run_day(cfg, stores)
    spec = ReviewSpec(input_uri=cfg.input_uri, output_uri=cfg.output_uri, review_size=20)
    assert queue_day(spec, stores.out, DAY, "q1").queued == 20
    studio = LabelStudio(url, token)
    try:
        sent = send_queue(spec, stores.out, stores.raw, studio, DAY)
        assert (sent.sent, sent.already) == (20, 0)
        assert send_queue(spec, stores.out, stores.raw, studio, DAY).sent == 0  # a re-run sends nothing twice

        tasks = list(studio.tasks(sent.project))
        assert len(tasks) == 20
        first = tasks[0]["data"]
        assert "<mark" in first["answer_html"] or "[" not in first["answer_html"]
        for index, task in enumerate(tasks[:12]):
            _annotate(studio, int(task["id"]), "fail" if index % 3 == 0 else "pass")
        _annotate(studio, int(tasks[0]["id"]), "borderline")  # a second annotation of one task

        landed = pull_labels(spec, stores.out, studio)
        assert landed.landed == 13 * 3
        assert pull_labels(spec, stores.out, studio).landed == 0  # incremental: nothing new
        stores.out.delete_keys([storage.review_state_key(f"label-studio-{sent.project}")])
        again = pull_labels(spec, stores.out, studio)  # the watermark lost: everything again, nothing landed
        assert (again.landed, again.already) == (0, 39)

        labels = read_labels(stores.out)
        assert labels.height == 39 and labels["label_id"].n_unique() == 39
        verdicts = labels.filter(pl.col("question") == "verdict")
        assert verdicts["record_id"].n_unique() == 12 and set(verdicts["annotator"]) == {USER}
        assert set(labels["source"]) == {f"label-studio:{sent.project}"}
        assert labels.filter(pl.col("question") == "supported")["label"].unique().to_list() == ["partly"]
    finally:
        studio.close()

    page, summary = build_daily_report(stores.out, DAY)
    assert summary["people"]["labels"] == 39 and summary["people"]["records"] == 12
    assert "People's labels" in page
