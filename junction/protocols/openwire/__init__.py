"""OpenWire, the wire protocol of ActiveMQ Classic clients: a sans-IO codec and connection.

* :mod:`.codec` -- framing, the negotiated encodings, limits (:class:`OpenWireCodec`);
* :mod:`.wireformat` -- WireFormatInfo and the negotiation;
* :mod:`.commands`, :mod:`.messages`, :mod:`.structures` -- every command and
  data structure of version 12 as a frozen dataclass;
* :mod:`.encoding`, :mod:`.primitives`, :mod:`.marshal` -- the encodings underneath;
* :mod:`.connection` -- the server side of one connection as a state table;
* :mod:`.inactivity` -- KeepAliveInfo and the inactivity monitor, on the caller's clock;
* :mod:`.opening` -- what the gateway reads before it routes.

It imports nothing of Junction but :mod:`junction.protocols.errors`.
"""
