"""Versions that shape a run's results, recorded in the ``runs`` table."""

from __future__ import annotations

import contextlib
from importlib import metadata

from evaluation.contract.config import RULES_VERSION
from evaluation.judges import PROMPT_VERSIONS

_PACKAGES = ("litellm", "polars", "great-expectations", "pydantic", "boto3", "apache-airflow")


def versions() -> dict[str, str]:
    """Rules and prompt versions, and the versions of the packages that shape results."""
    found = {"rules": RULES_VERSION, **{f"prompt.{judge}": version for judge, version in PROMPT_VERSIONS.items()}}
    for package in _PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[package] = metadata.version(package)
    return found
