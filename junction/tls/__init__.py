"""TLS at the edge: key and trust stores, server contexts with SNI, and the Twisted wrapper.

Acceptors take Artemis's URL parameters (``sslEnabled``, ``keyStorePath``,
``trustStorePath``, ``needClientAuth``, ``sniHost`` ...); :mod:`.stores` reads
the files, :mod:`.server` turns the parameters into OpenSSL contexts (one per
SNI host name plus a default), and :mod:`.listener` wraps an acceptor's
factory so that the protocols behind it, sniffing included, see plain bytes.
"""
