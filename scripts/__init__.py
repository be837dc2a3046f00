"""Runnable helpers of the repository (the demo, local Airflow); not part of the library."""
