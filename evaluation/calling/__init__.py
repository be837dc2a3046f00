"""The calling layer: the judge client (the one module that imports litellm), rate limits, the offline judge, batches."""

#: The modules the layers above import (each by its path: none is loaded here).
__all__ = ["batch", "client", "cost", "fleetrate", "offline", "outcome", "ratelimit"]
