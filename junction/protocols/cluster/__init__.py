"""Junction's internal cluster protocols (sans-IO).

``link``: the versioned link between two broker cores of a cluster connection
(handshake, binding notifications, forwarded messages and their
acknowledgements), documented in ``docs/cluster-protocol.md``.
``broadcast``: the UDP datagram a broadcast group sends and a discovery group
reads.
"""
