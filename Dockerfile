# Airflow image for the LLM-evaluation pipeline: the official image extended the documented way
# (https://airflow.apache.org/docs/docker-stack/build.html), not with _PIP_ADDITIONAL_REQUIREMENTS.
# docker-compose.yml builds it once (airflow-init) and runs it for every Airflow service.
#
# The Python 3.11 variant matches requirements.txt, which was resolved on Python 3.11, and the tag
# must match its apache-airflow pin (tests/test_compose.py checks both).
FROM apache/airflow:3.3.2-python3.11

# The base image's default user; pip installs into its environment, never as root.
USER airflow

# requirements.txt only: what the components and the tasks run (the test and lint tools are in
# requirements-dev.txt and never enter the image).
COPY --chown=airflow:0 requirements.txt /requirements.txt
# Naming apache-airflow again keeps pip from moving Airflow itself while resolving the pins.
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" -r /requirements.txt

# The image runs without mounts; docker-compose.yml mounts the same folders read-only over these
# for development.
COPY --chown=airflow:0 evaluation/ /opt/airflow/evaluation/
COPY --chown=airflow:0 dags/ /opt/airflow/dags/
COPY --chown=airflow:0 plugins/ /opt/airflow/plugins/
COPY --chown=airflow:0 scripts/check_install.py /opt/airflow/check_install.py
COPY --chown=airflow:0 scripts/check_storage.py /opt/airflow/check_storage.py

ENV PYTHONPATH=/opt/airflow:/opt/airflow/plugins \
    LITELLM_LOCAL_MODEL_COST_MAP=True

# Fail the build, not the first run: import what the scheduler, the Celery worker and the tasks
# import (the executor class, the providers, the pipeline) and load the drivers of the metadata DB
# (sync and async), the Celery result backend and the broker, for the URLs docker-compose.yml uses.
RUN python /opt/airflow/check_install.py
