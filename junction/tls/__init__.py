"""TLS contexts: key and trust stores, server contexts with SNI, client contexts.

Acceptors take Artemis's URL parameters (``sslEnabled``, ``keyStorePath``,
``trustStorePath``, ``needClientAuth``, ``sniHost`` ...); :mod:`.stores` reads
the files, :mod:`.server` turns the parameters into OpenSSL contexts (one per
SNI host name plus a default), and :mod:`.client` does the same for
connectors.  The listener that wraps an acceptor's factory in TLS, so that the
protocols behind it, sniffing included, see plain bytes, is
:mod:`junction.edge.tls`.
"""
