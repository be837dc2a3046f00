"""Tests that start a server (the OpenAI-compatible judge, S3 on loopback, a subprocess) or run a
whole day; tests/unit stays in process."""
