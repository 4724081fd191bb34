"""Generated from ``_async/__init__.py`` by ``scripts/unasync.py``: do not edit."""
