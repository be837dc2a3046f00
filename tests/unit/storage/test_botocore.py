"""botocore sessions of one process share the loader of service models (evaluation/storage/_botocore.py):
a second session's S3 client parses no model file again, and what its client does is unchanged."""

from __future__ import annotations

import boto3
import botocore.loaders

from evaluation.storage import share_models


def _session() -> boto3.Session:
    return boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="eu-west-1")


def test_sessions_share_one_loader_and_parse_each_model_once(monkeypatch) -> None:
    assert share_models(), "botocore's loader factory is not as _botocore.py read it: read the module again"
    first = _session()
    first.client("s3", endpoint_url="http://127.0.0.1:9")
    parsed: list[str] = []
    load_file = botocore.loaders.JSONFileLoader.load_file

    def counting(self: object, file_path: str) -> object:
        parsed.append(file_path)
        return load_file(self, file_path)  # type: ignore[arg-type]

    monkeypatch.setattr(botocore.loaders.JSONFileLoader, "load_file", counting)
    second = _session()
    client = second.client("s3", endpoint_url="http://127.0.0.1:9")
    assert parsed == []
    assert second._loader is first._loader  # one loader: the models parsed for the first session
    assert client.meta.service_model.service_name == "s3" and client.meta.region_name == "eu-west-1"
    # boto3 adds its data folder for each session: the shared loader keeps it once
    paths = first._loader.search_paths
    assert len(paths) == len(set(paths))


def test_parse_s3_models_leaves_a_new_sessions_s3_client_nothing_to_parse(monkeypatch) -> None:
    """What the Celery worker's preload does before it forks: the task processes make S3 clients from parsed models."""
    from evaluation.storage import parse_s3_models

    parse_s3_models()
    parsed: list[str] = []
    load_file = botocore.loaders.JSONFileLoader.load_file
    monkeypatch.setattr(botocore.loaders.JSONFileLoader, "load_file",
                        lambda self, file_path: parsed.append(file_path) or load_file(self, file_path))
    boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                  region_name="ap-southeast-2").client("s3")
    assert parsed == []
