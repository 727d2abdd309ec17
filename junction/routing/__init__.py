"""Connection routing as pure functions: keys, policies, targets (no I/O, no clock).

:mod:`.keys` turns what a connection's opening said (client id, SNI host,
source address, user, roles) into the key a router routes on;
:mod:`.policies` picks a ready target for a key (Artemis's policies and the
``junction.policies`` entry point); :mod:`.targets` is their vocabulary (a
target, a pool, a router's answer).  The gateway's routers run them on live
connections; the pipeline runs the very same functions over event logs, so
its figures are the gateway's.
"""
