"""Test helpers: local stand-ins for external services (e.g. an OpenAI-compatible LLM server)."""
