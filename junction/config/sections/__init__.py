"""One reader per section of ``broker.xml``, mixins of :class:`~junction.config.sections.base.ElementReader`.

``transports`` (acceptors, connectors), ``addresses`` (addresses, queues,
address-settings), ``security`` (security-settings), ``junction`` (Junction's
own element and wildcard-addresses), ``routers`` (connection-routers),
``cluster`` (broadcast and discovery groups, cluster connections, the cluster
credentials, ha-policy), ``references`` (names one section gives of another's
items).  :class:`junction.config.loader._Loader` puts them together.
"""
