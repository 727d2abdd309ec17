"""The pipeline's tests use the process's shared SparkSession (``spark``, tests/conftest.py,
made by tests/pipeline/sparkkit.py); ``session_conf`` is re-exported for their modules."""

from __future__ import annotations

from tests.pipeline.sparkkit import session_conf

__all__ = ["session_conf"]
