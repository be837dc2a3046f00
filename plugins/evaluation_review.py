"""Airflow glue for the review step: the Label Studio client from its Connection.

* ``label_studio`` (``EVALUATION_LABEL_STUDIO_CONN_ID`` names another; conn type ``http``):
  ``host`` the server (``http://label-studio:8080``, or a host with ``schema`` and ``port``),
  ``password`` a personal access token (Account & Settings, Personal Access Token; a legacy token
  works where the organisation allows it). Without the connection, the queue is only landed (and
  exported with ``python -m evaluation review export``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from airflow.sdk import Asset
from airflow.sdk.exceptions import AirflowFailException
from evaluation_airflow import connection

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from evaluation.stages.labelstudio import LabelStudio

LABEL_STUDIO_CONN_ID = os.environ.get("EVALUATION_LABEL_STUDIO_CONN_ID", "label_studio")
#: The event a pull that landed labels emits (``extra``: rows, objects): calibrations follow it.
HUMAN_LABELS_ASSET = Asset(name="llm_evaluation.human_labels", group="llm_evaluation")
#: The event a calibration on people's labels emits (``extra``: the calibration ids per judge model).
CALIBRATIONS_ASSET = Asset(name="llm_evaluation.calibrations", group="llm_evaluation")


def base_url(conn: Connection) -> str:
    """The server's URL from an HTTP connection (a host given with its scheme is kept as it is)."""
    host = (conn.host or "").rstrip("/")
    if not host:
        raise AirflowFailException(f"connection {conn.conn_id} has no host: set the Label Studio server's URL")
    if "://" not in host:
        host = f"{conn.schema or 'http'}://{host}"
    return f"{host}:{conn.port}" if conn.port else host


def label_studio() -> LabelStudio | None:
    """A Label Studio client from the connection; None when the connection does not exist."""
    # httpx and Polars: only in the task that talks to the server
    from evaluation.stages.labelstudio import LabelStudio

    conn = connection(LABEL_STUDIO_CONN_ID)
    if conn is None:
        return None
    if not conn.password:
        raise AirflowFailException(f"connection {LABEL_STUDIO_CONN_ID} has no password: set a Label Studio personal access token")
    return LabelStudio(base_url(conn), conn.password)
