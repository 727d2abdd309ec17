"""Junction: a protocol gateway, connection router and broker cores for messaging."""

__version__ = "0.1.0"
