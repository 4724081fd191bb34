"""Generated from ``_async/__init__.py`` (which documents it) by
``python/scripts/unasync.py``: do not edit."""

"""A client's modules, by job. ``_async`` is the source; ``_sync`` is generated
from it by ``python/scripts/unasync.py`` (except ``_io.py``, written for each)."""
