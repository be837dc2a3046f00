"""Logs as their sources write them land the same evaluations as the same conversations in the
project's own shape (CONTRACT §1, other log shapes): LiteLLM's S3 logging with payloads LiteLLM
itself made, on the S3 API, in its key layout; OpenTelemetry traces made with the SDK and encoded
by its OTLP encoder, in both attribute families, in the collector's layout. A review queue of such
a day reads its records' texts from the same logs."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import uuid
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import storage
from evaluation.cli.day import run_day
from evaluation.contract.options import build_config
from evaluation.contract.review import ReviewSpec
from evaluation.stages import RunFailed, Stores
from evaluation.stages.review import export_queue, queue_day
from evaluation.testing import synthetic
from evaluation.testing.sources import litellm_key, litellm_payloads, otel_export, otlp_json

DAY = dt.date(2026, 11, 25)
RECORDS = 18
#: Columns that differ between two runs of the same content.
RUN_COLUMNS = ("run_id", "judged_at", "latency_ms")
#: What a log of calls or spans holds of a conversation (labels such as references are not logged).
LOGGED = ("record_id", "conversation_id", "timestamp", "model", "question", "answer", "contexts")


def conversations(day: dt.date = DAY, records: int = RECORDS) -> list[dict[str, Any]]:
    """A generated day's records, as much of each as a log of the call holds."""
    return [{k: v for k, v in json.loads(line).items() if k in LOGGED}
            for line in synthetic.generate_day(day, records, bad=False)]


def land(root: Path, name: str, options: dict[str, Any], day: dt.date = DAY) -> dict[str, Any]:
    """Run the day from ``options`` (input_uri among them) into ``root/name``; its tables and result."""
    cfg = build_config({"output_uri": str(root / name), "judge_model": "offline/lexical", **options},
                       date=day, run_id=f"run-{name}", trigger="test")
    result = run_day(cfg, Stores.open(cfg))
    out = storage.open_store(str(root / name))
    return {"evaluations": storage.read_day(out, "evaluations", day), "result": result}


def land_own(root: Path, records: list[dict[str, Any]], day: dt.date = DAY) -> pl.DataFrame:
    raw = storage.open_store(str(root / "own-raw"))
    raw.write_bytes(f"{storage.raw_prefix(day)}part-000.jsonl", "".join(json.dumps(r) + "\n" for r in records).encode())
    return land(root, "own", {"input_uri": str(root / "own-raw")}, day)["evaluations"]


def exported(root: Path, name: str, raw: storage.Store, options: dict[str, Any], day: dt.date = DAY) -> pl.DataFrame:
    """The review queue of the day landed in ``root/name``, exported with its records' texts, which
    the export reads from ``raw`` with the run's input ``options``."""
    spec = ReviewSpec(output_uri=str(root / name), review_size=6, **options)
    out = storage.open_store(str(root / name))
    assert queue_day(spec, out, day, "q1").queued == 6
    export_queue(spec, out, raw, day, root / f"{name}-queue.jsonl")
    return pl.read_ndjson(root / f"{name}-queue.jsonl")


def comparable(evaluations: pl.DataFrame) -> pl.DataFrame:
    return evaluations.drop(RUN_COLUMNS).sort("record_id", "judge")


def assert_same(landed: pl.DataFrame, own: pl.DataFrame) -> None:
    """The same rows, naming the columns that differ when they do not."""
    landed, own = comparable(landed), comparable(own)
    assert landed.columns == own.columns and landed.height == own.height
    differ = [c for c in own.columns if not landed[c].equals(own[c])]
    assert not differ, {c: landed.filter(landed[c].ne_missing(own[c])).select("record_id", "judge", "judge_status", c).rows()[:3]
                        + own.filter(landed[c].ne_missing(own[c])).select("record_id", "judge", "judge_status", c).rows()[:3]
                        for c in differ}


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat().replace("+00:00", "Z")


# --------------------------------------------------------------------------------------------
# LiteLLM


@pytest.fixture(scope="module")
def litellm_day(local_s3: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    records = conversations()
    payloads = litellm_payloads(records, failed=1, embeddings=1)
    day = dt.datetime.fromtimestamp(payloads[0]["startTime"], dt.UTC).date()
    raw = storage.open_store(f"s3://llm-logs/litellm-{uuid.uuid4().hex[:8]}", local_s3.access())
    for index, payload in enumerate(payloads):  # as the logger writes them: one object per call
        raw.write_bytes(litellm_key(payload, hourly=index % 2 == 1), json.dumps(payload).encode())
    own = [{**record, "record_id": payload["id"], "timestamp": _iso(payload["startTime"])}
           for record, payload in zip(records, payloads, strict=False)]
    root = tmp_path_factory.mktemp("litellm")
    return {"day": day, "payloads": payloads, "raw": raw, "root": root,
            "questions": {payload["id"]: record["question"] for record, payload in zip(records, payloads, strict=False)},
            "litellm": land(root, "litellm", {"input_uri": raw.root, "input_format": "litellm"}, day),
            "own": land_own(root, own, day)}


def test_litellm_payloads_land_the_evaluations_of_the_same_conversations(litellm_day: dict[str, Any]) -> None:
    own = comparable(litellm_day["own"])
    assert own.height == RECORDS * 3 and own.filter(pl.col("invalid_citations").list.len() > 0).height > 0
    assert_same(litellm_day["litellm"]["evaluations"], litellm_day["own"])


def test_litellm_objects_lie_in_its_layout(litellm_day: dict[str, Any]) -> None:
    keys = [o.key for o in litellm_day["raw"].list("")]
    day = litellm_day["day"].isoformat()
    assert all(k.startswith(f"{day}/") and k.endswith(".json") for k in keys)
    assert {len(k.split("/")) for k in keys} == {2, 3}  # daily and hourly partitions


def test_failed_and_embedding_calls_are_skipped_and_counted(litellm_day: dict[str, Any]) -> None:
    assert [p["status"] for p in litellm_day["payloads"][RECORDS:]] == ["failure", "success"]
    result = litellm_day["litellm"]["result"]
    assert (result["input"], result["valid"], result["rejected"]) == (RECORDS, RECORDS, 0)
    assert result["skipped"] == {"failed call": 1, "not a chat call (embedding)": 1}


def test_a_review_queue_of_a_litellm_day_reads_its_records_texts_from_the_payloads(litellm_day: dict[str, Any]) -> None:
    rows = exported(litellm_day["root"], "litellm", litellm_day["raw"], {"input_format": "litellm"}, litellm_day["day"])
    assert rows.height == 6
    assert {r["record_id"]: r["question"] for r in rows.iter_rows(named=True)}.items() <= litellm_day["questions"].items()


# --------------------------------------------------------------------------------------------
# OpenTelemetry


def _minute_key(day: dt.date, minute: int, name: str) -> str:
    return f"{storage.raw_prefix(day, 'ymd')}hour=10/minute={minute:02d}/{name}"


@pytest.fixture(scope="module", params=["genai", "openinference"])
def otel_day(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    records = conversations()
    spans, ids = otel_export(records, request.param)
    root = tmp_path_factory.mktemp(f"otel-{request.param}")
    raw = storage.open_store(str(root / "raw"))
    llm = [s for s in spans if s.name == "chat"]
    others = [s for s in spans if s.name != "chat"]
    # A trace spans objects and minutes: its retriever spans in one object, its LLM span in the next
    # (gzipped, ids as protobuf's JSON mapping writes them: base64).
    raw.write_bytes(_minute_key(DAY, 1, "traces_a.json"), otlp_json(others))
    raw.write_bytes(_minute_key(DAY, 2, "traces_b.json.gz"), gzip.compress(otlp_json(llm, hex_ids=False)))
    own = [{**r, "record_id": ids[r["record_id"]]} for r in records]
    return {"otel": land(root, "otel", {"input_uri": str(root / "raw"), "input_format": "otel"}), "root": root, "raw": raw,
            "questions": {ids[r["record_id"]]: r["question"] for r in records},
            "own": land_own(root, own)}


def test_otel_traces_land_the_evaluations_of_the_same_conversations(otel_day: dict[str, Any]) -> None:
    own = comparable(otel_day["own"])
    assert own.height == RECORDS * 3 and own.filter(pl.col("invalid_citations").list.len() > 0).height > 0
    # Traces are assembled trace by trace, not in file order: of two records with the same judge
    # request, another one is judged first and the other reuses its call (attempts 0, cached).
    order = ("attempts", "cached")
    assert_same(otel_day["otel"]["evaluations"].drop(order), otel_day["own"].drop(order))
    assert otel_day["otel"]["evaluations"]["cached"].sum() == otel_day["own"]["cached"].sum()
    assert otel_day["otel"]["result"]["skipped"] == {}


def test_a_review_queue_of_an_otel_day_reads_its_records_texts_from_the_traces(otel_day: dict[str, Any]) -> None:
    rows = exported(otel_day["root"], "otel", otel_day["raw"], {"input_format": "otel"})
    assert rows.height == 6
    assert {r["record_id"]: r["question"] for r in rows.iter_rows(named=True)}.items() <= otel_day["questions"].items()


def test_an_otel_day_in_another_layout_names_where_it_looked(tmp_path: Path) -> None:
    raw = storage.open_store(str(tmp_path / "raw"))
    spans, _ = otel_export(conversations(records=2), "genai")
    raw.write_bytes(f"{storage.raw_prefix(DAY)}traces.json", otlp_json(spans))  # hive, not the collector's
    with pytest.raises(RunFailed, match=r"year=2026/month=11/day=25 does not exist.*input_layout ymd"):
        land(tmp_path, "out", {"input_uri": str(tmp_path / "raw"), "input_format": "otel"})
    result = land(tmp_path, "hive", {"input_uri": str(tmp_path / "raw"), "input_format": "otel", "input_layout": "hive"})
    assert result["result"]["valid"] == 2


def test_a_review_queue_reads_the_texts_in_the_layout_the_run_was_given(tmp_path: Path) -> None:
    records = conversations(records=8)
    spans, ids = otel_export(records, "genai")
    raw = storage.open_store(str(tmp_path / "raw"))
    raw.write_bytes(f"{storage.raw_prefix(DAY)}traces.json", otlp_json(spans))  # hive, not the collector's
    options = {"input_format": "otel", "input_layout": "hive"}
    land(tmp_path, "hive", {"input_uri": str(tmp_path / "raw"), **options})
    rows = exported(tmp_path, "hive", raw, options)
    assert {r["record_id"]: r["question"] for r in rows.iter_rows(named=True)}.items() \
        <= {ids[r["record_id"]]: r["question"] for r in records}.items()


# --------------------------------------------------------------------------------------------
# Gateways and flat logs, through a mapping


def _gateway(record: dict[str, Any]) -> dict[str, Any]:
    """A record as an API gateway logs the request and response it passed on."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Cite passages."},
        {"role": "user", "content": [{"type": "text", "text": record["question"]}]},  # text parts
    ]
    if record.get("contexts"):
        messages += [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
                     {"role": "tool", "tool_call_id": "c1", "content": json.dumps(record["contexts"])}]
    moment = dt.datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00"))
    return {"request": {"model": record["model"], "messages": messages},
            "response": {"id": record["record_id"], "model": record["model"],
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": record["answer"]}}]},
            "ts": moment.strftime("%Y-%m-%d %H:%M:%S.%f"), "session": record["conversation_id"]}


def _write(root: Path, name: str, lines: list[dict[str, Any]]) -> str:
    raw = storage.open_store(str(root / name))
    raw.write_bytes(f"{storage.raw_prefix(DAY)}part-000.jsonl", "".join(json.dumps(r) + "\n" for r in lines).encode())
    return raw.root


def test_a_gateway_record_lands_through_a_mapping_of_its_messages(tmp_path: Path) -> None:
    records = conversations()
    mapping = ("messages=request.messages, response=response, record_id=response.id, model=response.model, "
               "timestamp=ts, conversation_id=session")
    uri = _write(tmp_path, "gateway", [_gateway(r) for r in records])
    landed = land(tmp_path, "gateway", {"input_uri": uri, "input_mapping": mapping})
    assert_same(landed["evaluations"], land_own(tmp_path, records))


def test_a_string_context_and_epoch_milliseconds_land(tmp_path: Path) -> None:
    records = [{**r, "contexts": [c["text"] for c in r["contexts"][:1]]} for r in conversations() if r.get("contexts")]
    flat = [{"id": r["record_id"], "ts_ms": int(dt.datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00"))
                                                 .timestamp() * 1000), "model": r["model"], "q": r["question"],
             "a": r["answer"], "context": r["contexts"][0]} for r in records]
    mapping = "record_id=id, timestamp=ts_ms, model=model, question=q, answer=a, contexts=context"
    landed = land(tmp_path, "flat", {"input_uri": _write(tmp_path, "flat", flat), "input_mapping": mapping})
    assert_same(landed["evaluations"], land_own(tmp_path, [{k: v for k, v in r.items() if k != "conversation_id"}
                                                            for r in records]))


# --------------------------------------------------------------------------------------------
# Nothing lost without a count


def test_a_truncated_gzip_fails_the_day_naming_the_lost_tail(tmp_path: Path) -> None:
    lines = "".join(json.dumps(r) + "\n" for r in conversations(records=200)).encode()
    compressed = gzip.compress(lines)
    raw = storage.open_store(str(tmp_path / "raw"))
    raw.write_bytes(f"{storage.raw_prefix(DAY)}part-000.jsonl.gz", compressed[: len(compressed) * 3 // 4])
    with pytest.raises(RunFailed) as failed:
        land(tmp_path, "out", {"input_uri": raw.root})
    message = str(failed.value)
    assert "1 object(s) could not be read to the end" in message
    assert f"{raw.uri(storage.raw_prefix(DAY) + 'part-000.jsonl.gz')} is a truncated or corrupt gzip: read up to line " in message
    rejects = pl.read_parquet(tmp_path / "out" / "_failed" / f"dt={DAY}" / "run=run-out" / "rejects.parquet")
    (damaged,) = rejects.filter(pl.col("reasons").list.first().str.starts_with("object damaged")).rows(named=True)
    assert 100 < damaged["line_no"] < 200  # the first line not read


def test_chat_records_read_as_own_records_hint_at_the_format(tmp_path: Path) -> None:
    chat = [synthetic.to_openai_chat(json.dumps(r)) for r in conversations(records=4)]
    raw = storage.open_store(str(tmp_path / "raw"))
    raw.write_bytes(f"{storage.raw_prefix(DAY)}part-000.jsonl", ("\n".join(chat) + "\n").encode())
    with pytest.raises(RunFailed):
        land(tmp_path, "out", {"input_uri": raw.root})
    rejects = pl.read_parquet(tmp_path / "out" / "_failed" / f"dt={DAY}" / "run=run-out" / "rejects.parquet")
    assert rejects.height == 4
    hint = "messages: the record looks like the openai-chat format: read it with --input-format openai-chat"
    assert all(hint in reasons for reasons in rejects["reasons"].to_list())


# --------------------------------------------------------------------------------------------
# A day of many small objects (one per LiteLLM call): read by a bounded pool


def _small_objects(local_s3: Any, connections: int | None, count: int) -> tuple[storage.S3Store, list[storage.ObjectInfo]]:
    """``count`` one-call objects on the S3 server, through a client of ``connections`` connections."""
    from botocore.config import Config

    config = storage.s3_config(Config(max_pool_connections=connections) if connections else None)
    access = storage.s3_access(local_s3.session(), endpoint_url=local_s3.endpoint_url, config=config)
    raw = storage.S3Store(f"s3://llm-logs/small-{uuid.uuid4().hex[:8]}", access)
    for index in range(count):
        raw.write_bytes(f"{DAY}/call-{index:03d}.json", json.dumps({"id": f"call-{index:03d}"}).encode())
    return raw, raw.list(f"{DAY}/")


class _Reads:
    """``store.read_bytes`` wrapped: the most reads in flight at once; each read waits at ``gate``."""

    def __init__(self, store: storage.S3Store, gate: Any) -> None:
        import threading

        self.read, self.gate, self.lock = store.read_bytes, gate, threading.Lock()
        self.in_flight = self.most = 0

    def __call__(self, key: str) -> bytes:
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            self.gate.wait()  # every read waits until the pool's size of them are in flight
            return self.read(key)
        finally:
            with self.lock:
                self.in_flight -= 1


def test_a_day_of_small_objects_is_read_with_one_read_in_flight_per_connection(local_s3: Any, tmp_path: Path) -> None:
    """The pool defaults to the S3 client's connections: with 4, four reads are in flight at once
    (each waits at a barrier of 4, which breaks if the pool holds fewer), never more; the objects
    still come out in key order, each whole."""
    import threading

    from evaluation.stages.ingest import raw_sources

    store, objects = _small_objects(local_s3, 4, 12)
    assert store.connections == 4
    reads = _Reads(store, threading.Barrier(4, timeout=60))
    store.read_bytes = reads  # type: ignore[method-assign]
    read = list(raw_sources(store, objects))
    assert [uri for uri, _ in read] == [store.uri(o.key) for o in objects]
    assert [json.loads(data)["id"] for _, data in read] == [f"call-{i:03d}" for i in range(12)]  # type: ignore[arg-type]
    assert reads.most == 4


def test_the_s3_client_keeps_a_connection_for_each_read_of_the_pool() -> None:
    """botocore keeps 10 connections unless told; the client keeps S3_MAX_POOL_CONNECTIONS, so the
    read pool's reads each have one, and a configuration (an Airflow connection's) can change it."""
    from botocore.config import Config

    from evaluation.storage.stores import S3_MAX_POOL_CONNECTIONS

    assert Config().max_pool_connections == 10
    assert storage.s3_config().max_pool_connections == S3_MAX_POOL_CONNECTIONS == 64
    assert storage.s3_config(Config(max_pool_connections=16)).max_pool_connections == 16


def test_what_is_read_ahead_of_the_parser_is_bounded_in_bytes(local_s3: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """However many connections, no more than READ_AHEAD_BYTES (and the object that crosses it) of
    objects are read ahead of the one the parser holds: reads handed to the pool, counted as the
    pool is given them."""
    from concurrent.futures import ThreadPoolExecutor

    from evaluation.stages import ingest as ingest_stage

    submitted = []

    class Counted(ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            submitted.append(args)
            return super().submit(fn, *args, **kwargs)

    store, objects = _small_objects(local_s3, 8, 20)
    monkeypatch.setattr(ingest_stage, "ThreadPoolExecutor", Counted)
    monkeypatch.setattr(ingest_stage, "READ_AHEAD_BYTES", 3 * max(o.size for o in objects))
    ahead = [len(submitted) - taken for taken, _ in enumerate(ingest_stage.raw_sources(store, objects), start=1)]
    assert len(ahead) == 20 and len(submitted) == 20
    assert max(ahead) == 2  # two read ahead: three objects' bytes, the parser's own among them
    monkeypatch.setattr(ingest_stage, "READ_AHEAD_BYTES", 64 << 20)
    submitted.clear()
    ahead = [len(submitted) - taken for taken, _ in enumerate(ingest_stage.raw_sources(store, objects), start=1)]
    assert max(ahead) == 15  # without the byte bound: twice the connections held, the parser's among them


def test_a_large_object_is_read_from_a_scratch_file_gone_once_the_parser_moves_on(
        local_s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """An object above SMALL_OBJECT_BYTES is downloaded to a file of its own, in key order among
    the small ones read into memory; the file holds the object, and it and its folder are gone
    when the next object is asked for, or when the reader stops early."""
    from evaluation.stages import ingest as ingest_stage

    store, objects = _small_objects(local_s3, None, 6)
    large = {o.key for o in objects[1::2]}
    monkeypatch.setattr(ingest_stage, "SMALL_OBJECT_BYTES", min(o.size for o in objects) + 1)
    for o in objects:
        if o.key in large:
            store.write_bytes(o.key, json.dumps({"id": o.key, "pad": "x" * 200}).encode())
    objects = store.list(f"{DAY}/")
    files: list[Path] = []
    read = []
    for uri, source in ingest_stage.raw_sources(store, objects):
        assert all(not f.exists() and not f.parent.exists() for f in files)  # the one before is gone
        if isinstance(source, Path):
            files.append(source)
            read.append(json.loads(source.read_bytes())["id"])
        else:
            read.append(json.loads(source)["id"])
        assert uri == store.uri(objects[len(read) - 1].key)
    assert len(files) == len(large) == 3 and not any(f.parent.exists() for f in files)
    assert read == [o.key if o.key in large else f"call-{i:03d}" for i, o in enumerate(objects)]
    reader = ingest_stage.raw_sources(store, objects)
    next(reader)
    _, held = next(reader)
    assert isinstance(held, Path) and held.exists()
    reader.close()  # type: ignore[attr-defined]  # a reader that stops early: its scratch folder goes with it
    assert not held.parent.exists()
