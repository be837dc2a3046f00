"""Label Studio, over its REST API (httpx): a project with the review's labelling interface
(:data:`LABEL_CONFIG`), the queue sent as tasks (:func:`send_queue`) and completed annotations
pulled back as ``human_labels`` (:func:`pull_labels`).

Sending and pulling are idempotent, pulling incremental (a watermark, and
:func:`~evaluation.storage.labels.land_labels` landing only label ids it has not landed): how, in
docs/people.md, "Label Studio".

Authentication: a personal access token (a JWT refresh token: exchanged at ``/api/token/refresh``
for a short-lived access token, exchanged again when that expires), or a legacy token.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import httpx
import polars as pl
from pydantic import BaseModel, Field

from evaluation import storage
from evaluation.contract.review import QUESTIONS, ReviewError, ReviewSpec
from evaluation.stages.review import queued_records, read_queues
from evaluation.storage.labels import ANSWERS, Annotation, LandedLabels, labelled_records, land_labels

logger = logging.getLogger(__name__)

_ASKED = {"supported": "Is the answer supported by the contexts? (yes: every claim is backed by a context)",
          "answers": "Does it answer the question?", "verdict": "Verdict: would you ship this answer?"}


def _choices(name: str) -> str:
    inner = "".join(f'<Choice value="{value}"/>' for value in ANSWERS[name])
    return (f'<Header value="{html.escape(_ASKED[name])}"/>'
            f'<Choices name="{name}" toName="answer" choice="single-radio" required="true" showInline="true">'
            f"{inner}</Choices>")


#: The labelling interface: the question, the answer with its citations highlighted, the
#: contexts as numbered passages, then the three questions and a note.
LABEL_CONFIG = (
    '<View><Style>.ctx{margin:.4em 0;padding:.4em;border-left:3px solid #999} mark{background:#fde68a}'
    " mark.invalid{background:#fca5a5}</Style>"
    '<Header value="Question"/><Text name="question" value="$question"/>'
    '<Header value="Answer"/><HyperText name="answer" value="$answer_html"/>'
    '<Header value="Contexts"/><HyperText name="contexts" value="$contexts_html"/>'
    + "".join(_choices(name) for name in QUESTIONS)
    + '<Header value="Note (what is wrong, or anything unclear)"/>'
    '<TextArea name="note" toName="answer" rows="3" maxSubmissions="1" editable="true"/></View>'
)

_CITATION = re.compile(r"\[([^\[\]\n]*?)\]")


def answer_html(answer: str, context_ids: set[str]) -> str:
    """The answer as HTML, each ``[citation]`` marked (one naming no context marked invalid)."""
    parts, last = [], 0
    for match in _CITATION.finditer(answer):
        parts.append(html.escape(answer[last:match.start()]))
        invalid = "" if match.group(1) in context_ids else " class='invalid' title='no context has this id'"
        parts.append(f"<mark{invalid}>{html.escape(match.group(0))}</mark>")
        last = match.end()
    parts.append(html.escape(answer[last:]))
    return "<div style='white-space:pre-wrap'>" + "".join(parts) + "</div>"


def contexts_html(contexts: list[dict[str, Any]]) -> str:
    """The contexts as numbered passages (their ids as the answer cites them)."""
    if not contexts:
        return "<p><i>No contexts were retrieved for this answer.</i></p>"
    return "".join(f"<div class='ctx'><b>[{html.escape(str(c.get('id')))}]</b> "
                   f"<span style='white-space:pre-wrap'>{html.escape(str(c.get('text', '')))}</span></div>"
                   for c in contexts)


def task_of(row: dict[str, Any]) -> dict[str, Any]:
    """A Label Studio task for a queued record with its texts (:func:`~evaluation.stages.review.queued_records`)."""
    contexts = json.loads(row["contexts"] or "[]")
    ids = {str(c.get("id")) for c in contexts}
    return {"data": {
        "record_key": f"{row['record_dt']}/{row['record_id']}", "record_id": row["record_id"],
        "record_dt": str(row["record_dt"]), "model": row["model"], "stratum": row["stratum"],
        "queue_id": row["queue_id"], "question": row["question"] or "",
        "answer_html": answer_html(row["answer"] or "", ids), "contexts_html": contexts_html(contexts)}}


class LabelStudio:
    """A Label Studio server: ``base_url`` and a token (a personal access token or a legacy one)."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._personal = token.count(".") == 2  # a JWT: a personal access token
        self._access: str | None = None
        self._http = httpx.Client(base_url=self.base_url, timeout=60.0)

    def close(self) -> None:
        self._http.close()

    def _headers(self, *, fresh: bool = False) -> dict[str, str]:
        if not self._personal:
            return {"Authorization": f"Token {self._token}"}
        if self._access is None or fresh:
            reply = self._http.post("/api/token/refresh/", json={"refresh": self._token})
            self._check(reply, "exchange the personal access token")
            self._access = str(reply.json()["access"])
        return {"Authorization": f"Bearer {self._access}"}

    def _check(self, reply: httpx.Response, action: str) -> None:
        if reply.is_error:
            raise ReviewError(f"Label Studio at {self.base_url}: cannot {action}: HTTP {reply.status_code} "
                              f"{reply.text[:300]}")

    def request(self, method: str, path: str, action: str, **kwargs: Any) -> Any:
        """One API call (the access token exchanged again once if it expired); its JSON."""
        reply = self._http.request(method, path, headers=self._headers(), **kwargs)
        if reply.status_code == 401 and self._personal:
            reply = self._http.request(method, path, headers=self._headers(fresh=True), **kwargs)
        self._check(reply, action)
        return reply.json() if reply.content else None

    def project(self, title: str, project_id: int | None = None) -> int:
        """The id of project ``project_id`` (checked to exist), else of the project titled
        ``title``, created with :data:`LABEL_CONFIG` when there is none."""
        if project_id is not None:
            self.request("GET", f"/api/projects/{project_id}/", f"read project {project_id}")
            return project_id
        listed = self.request("GET", "/api/projects/", "list projects", params={"title": title, "page_size": 100})
        for item in listed.get("results", listed) if isinstance(listed, dict) else listed:
            if item.get("title") == title:
                return int(item["id"])
        created = self.request("POST", "/api/projects/", f"create project {title!r}",
                               json={"title": title, "label_config": LABEL_CONFIG})
        logger.info("Label Studio project %s created at %s", created["id"], self.base_url)
        return int(created["id"])

    def tasks(self, project: int) -> Iterator[dict[str, Any]]:
        """Every task of the project (its data; annotations not included), page by page."""
        page, seen = 1, 0
        while True:
            listed = self.request("GET", "/api/tasks/", f"list the tasks of project {project}",
                                  params={"project": project, "page": page, "page_size": 200})
            items = listed.get("tasks", []) if isinstance(listed, dict) else listed
            yield from items
            seen += len(items)
            if not items or seen >= int(listed.get("total", seen) if isinstance(listed, dict) else seen):
                return
            page += 1

    def import_tasks(self, project: int, tasks: list[dict[str, Any]]) -> None:
        """Add tasks to the project."""
        if tasks:
            self.request("POST", f"/api/projects/{project}/import", f"import {len(tasks)} tasks into project {project}",
                         json=tasks)

    def users(self) -> dict[int, str]:
        """User id -> e-mail (an export names annotators by id)."""
        listed = self.request("GET", "/api/users/", "list users")
        items = listed.get("results", []) if isinstance(listed, dict) else listed
        return {int(u["id"]): str(u.get("email") or u.get("username") or u["id"]) for u in items}

    def annotated(self, project: int) -> list[dict[str, Any]]:
        """The project's annotated tasks with their annotations (its JSON export)."""
        return list(self.request("GET", f"/api/projects/{project}/export", f"export project {project}",
                                 params={"exportType": "JSON"}))


def _answer(result: list[dict[str, Any]], name: str) -> str | None:
    for item in result:
        if item.get("from_name") == name:
            value = item.get("value", {})
            found = value.get("choices") or value.get("text") or []
            return str(found[0]) if found else None
    return None


def _annotator(completed_by: Any, users: dict[int, str]) -> str:
    if isinstance(completed_by, dict):
        return str(completed_by.get("email") or completed_by.get("username") or completed_by.get("id"))
    return users.get(int(completed_by), f"user-{completed_by}")


def _time(text: str) -> dt.datetime:
    moment = dt.datetime.fromisoformat(text)
    return (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)


def annotations_of(tasks: list[dict[str, Any]], project: int, after: dt.datetime | None = None,
                   users: dict[int, str] | None = None) -> list[Annotation]:
    """The annotations of exported ``tasks`` updated after ``after`` (cancelled ones left out);
    ``users`` names the annotators an export gives by id (their e-mail)."""
    found = []
    for task in tasks:
        data = task.get("data", {})
        for item in task.get("annotations", []):
            updated = _time(str(item.get("updated_at") or item["created_at"]))
            if item.get("was_cancelled") or (after is not None and updated < after):
                continue
            result = item.get("result", [])
            found.append(Annotation(
                record_dt=dt.date.fromisoformat(data["record_dt"]), record_id=data["record_id"],
                annotator=_annotator(item.get("completed_by"), users or {}), labelled_at=updated,
                supported=_answer(result, "supported"), answers=_answer(result, "answers"),
                verdict=_answer(result, "verdict"), note=_answer(result, "note"), source=f"label-studio:{project}",
                task_id=str(task.get("id")), annotation_id=str(item["id"])))
    return found


class SentTasks(BaseModel):
    """What sending the queue did."""

    project: int
    sent: int = Field(description="Tasks created now.")
    already: int = Field(description="Queued records that had a task already.")


def send_queue(spec: ReviewSpec, store: storage.Store, raw: storage.Store, studio: LabelStudio,
               day: dt.date | None = None) -> SentTasks:
    """Send the queued records (of ``day``, else of every queue) that are neither labelled nor a
    task of the project yet."""
    project = studio.project(spec.label_studio_title, spec.label_studio_project)
    queue = read_queues(store)
    if day is not None:
        queue = queue.filter(pl.col("record_dt") == day)
    have = {str(t.get("data", {}).get("record_key")) for t in studio.tasks(project)}
    have |= {f"{d}/{r}" for d, r in labelled_records(store)}
    keys = pl.concat_str(pl.col("record_dt").cast(pl.String), pl.lit("/"), pl.col("record_id"))
    todo = queue.filter(~keys.is_in(list(have)))
    tasks = [task_of(row) for row in queued_records(spec, raw, todo).iter_rows(named=True)]
    studio.import_tasks(project, tasks)
    logger.info("Label Studio project %s: %d tasks sent, %d queued records had one", project, len(tasks),
                queue.height - todo.height)
    return SentTasks(project=project, sent=len(tasks), already=queue.height - todo.height)


def pull_labels(spec: ReviewSpec, store: storage.Store, studio: LabelStudio) -> LandedLabels:
    """Land the project's annotations updated since the last pull, then move the watermark."""
    project = studio.project(spec.label_studio_title, spec.label_studio_project)
    key = storage.review_state_key(f"label-studio-{project}")
    state = storage.read_json(store, key) if store.exists(key) else {}
    after = _time(state["updated_after"]) if state.get("updated_after") else None
    annotations = annotations_of(studio.annotated(project), project, after, studio.users())
    landed = land_labels(store, annotations, read_queues(store))
    if annotations:
        newest = max(a.labelled_at for a in annotations)
        storage.write_json(store, key, {"project": project, "base_url": studio.base_url,
                                        "updated_after": newest.isoformat()})
    logger.info("Label Studio project %s: %d annotations updated since %s, %d label rows landed", project,
                len(annotations), after, landed.landed)
    return landed
