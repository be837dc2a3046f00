"""The command line: ``python -m evaluation``."""

#: The modules the layers above import (each by its path: none is loaded here).
__all__ = ["calibrate", "day", "main", "review", "sample_formats", "sample_logs", "support"]
