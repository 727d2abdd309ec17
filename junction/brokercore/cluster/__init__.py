"""Broker clusters: discovery, cluster connections, remote bindings, bridges.

A node's cluster connections link it to its peers over the internal link
protocol (:mod:`junction.protocols.cluster.link`); peers tell each other which
queues and consumers they have (remote bindings), and the node's routing
forwards messages to them by the cluster connection's message-load-balancing
mode, with redistribution and scale-down moving messages later.
"""
