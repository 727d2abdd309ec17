"""What every floor above agrees on about messages: pure data, no Twisted, no I/O.

:mod:`.message` is the protocol-neutral message (its routing type, body type,
typed property values) and its byte encoding, which the journal and the
cluster links share; :mod:`.filter` parses Artemis filter expressions (JMS
selectors) into predicates over such a message; :mod:`.errors` are the errors
a broker core reports to protocol sessions, each with Artemis's error type.
The configuration (``junction.config``) checks routing types and filters with
these, below the broker core that acts on them.
"""
