"""Structured event logs: what gateways and broker cores did, as JSON Lines.

:mod:`.schema` is the one definition of every event kind, shared by the
writers and by the PySpark pipeline (``junction.pipeline``), which reads
nothing else of Junction but the pure functions of ``junction.routing``.
:mod:`.writer` batches events to rotated files off the reactor's hot path.
"""
