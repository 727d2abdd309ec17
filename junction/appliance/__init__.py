"""The appliance: a gateway and its broker cores from one folder, as child processes.

:mod:`.folder` reads and cross-checks every node config of the appliance
folder and makes one ``junction run`` child per node; :mod:`.supervisor` runs
them (cores first), restarts one that dies with a backoff and stops them
together (gateways first).  ``junction up`` (:mod:`junction.cli.commands`)
wires them to the live board of :mod:`junction.cli.board`.
"""
