"""Test helpers: local stand-ins for external services (e.g. an OpenAI-compatible LLM server)."""

#: The modules the layers above import (each by its path: none is loaded here).
__all__ = ["batches", "biased", "correlated", "labelled", "openai_server", "ratelimit", "replies", "s3", "sources", "synthetic"]
