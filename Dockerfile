# Airflow image for the LLM-evaluation pipeline: the official image extended the documented way
# (https://airflow.apache.org/docs/docker-stack/build.html), not with _PIP_ADDITIONAL_REQUIREMENTS.
#
# The Python 3.11 variant matches requirements.txt, which was resolved on Python 3.11, and the tag
# must match its apache-airflow pin (tests/test_compose.py checks both).
FROM apache/airflow:3.3.2-python3.11

# The base image's default user; pip installs into its environment, never as root.
USER airflow

COPY --chown=airflow:0 requirements.txt /requirements.txt
# Naming apache-airflow again keeps pip from moving Airflow itself while resolving the pins.
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" -r /requirements.txt

# requirements.txt lists what the pipeline imports; the Celery executor, the Postgres driver and the
# Redis client come with the official image. Fail the build, not the first task, if any went missing.
RUN python -c "import importlib.metadata as m; \
[m.version(d) for d in ('apache-airflow-providers-celery', 'celery', 'redis', 'psycopg2-binary', \
'apache-airflow-providers-amazon', 'litellm')]"

# The image runs without mounts; docker-compose.yml mounts the same folders read-only over these
# for development.
COPY --chown=airflow:0 evaluation/ /opt/airflow/evaluation/
COPY --chown=airflow:0 dags/ /opt/airflow/dags/
COPY --chown=airflow:0 plugins/ /opt/airflow/plugins/

ENV PYTHONPATH=/opt/airflow \
    LITELLM_LOCAL_MODEL_COST_MAP=True
