"""A local SparkSession shared by the pipeline's tests (starting the JVM takes seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from junction.pipeline.common import get_spark

    session = get_spark("local[2]")
    yield session
    session.stop()
