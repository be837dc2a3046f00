"""The page pieces every page shares: the HTML shell, its small pieces and the charts."""

#: The modules the layers above import (each by its path: none is loaded here).
__all__ = ["charts", "html", "markup"]
