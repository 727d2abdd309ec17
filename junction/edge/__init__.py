"""What every listener shares, a broker core's and a gateway's alike.

A connection meets these from the outside in: :mod:`.admission` (per-source
limits at accept, and the offender log), the PROXY protocol header and the
sniffing hand-over of a multi-protocol acceptor (:mod:`.acceptor`), the TLS
wrapper (:mod:`.tls`: handshake deadline and limit, SNI name and client
certificate of a connection), and the socket options from the acceptor's URL
(:mod:`.sockets`).  :mod:`.stack` puts these layers together for an acceptor
around the factory the node gives it, and listens with the acceptor's
backlog.  Nothing here knows a broker core or a router: a listener hands the
connection to the factory beneath it.
"""
