"""botocore's private API, in one module: one loader of its service models for every session of the process.

A botocore session parses the JSON files a client needs (S3's API and endpoint rules, the
partitions, the retry and default-configuration files) into a loader of its own, which caches them
for that session only. A process that makes several sessions (each task run of ``dag.test``, a
comparison's stores, a scheduler's or worker's repeated S3 hooks) parsed them again each time:
about 70 ms of CPU for each S3 client made from a new session, against about 9 ms with the models
already parsed (measured on this project's 2-core machines). :func:`share_models` makes the
sessions made from then on share one loader. What a loader caches is parsed, read-only data keyed
by file and API version, the same for every session of a process with the same data path (one loader
for each value of ``AWS_DATA_PATH``).

Read from botocore 1.44 and boto3 1.44: a session registers its loader lazily with the factory
``botocore.session.create_loader``, and a boto3 session adds boto3's own data folder to its
loader's ``_search_paths`` when it is made. :func:`share_models` replaces the factory with a cached
one whose loader adds a folder it already searches only once. When either name is missing (another
botocore), nothing changes: sessions parse the models each, slower and alike, and
``tests/unit/storage/test_botocore.py`` fails so this module is read again.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

logger = logging.getLogger(__name__)


class _SearchPaths(list[str]):
    """A loader's folders, to which a folder already there is not added again (boto3 adds its own
    for each session it makes: with one loader, the list would grow by one a session)."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


@functools.cache
def share_models() -> bool:
    """Make the botocore sessions made from now on share one loader of service models (call it
    before making a session: boto3 asks for the loader when the session is made); whether they do."""
    # botocore: only on the S3 path
    import botocore.loaders
    import botocore.session

    factory = getattr(botocore.session, "create_loader", None)
    if factory is not botocore.loaders.create_loader or not hasattr(factory(), "_search_paths"):
        logger.debug("botocore's loader factory is not as read: each session parses its service models")
        return False

    @functools.cache
    def shared_loader(search_path_string: str | None = None) -> Any:
        loader = factory(search_path_string)
        loader._search_paths = _SearchPaths(loader._search_paths)
        return loader

    botocore.session.create_loader = shared_loader
    return True


def parse_s3_models() -> None:
    """Parse what an S3 client needs into the shared loader now: a Celery worker does it once
    before it forks, and the task processes forked from it make their clients from parsed models."""
    if share_models():
        import boto3  # on the S3 path only

        boto3.Session(aws_access_key_id="-", aws_secret_access_key="-", region_name="us-east-1").client("s3")
