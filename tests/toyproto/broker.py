"""TOY's broker adapter: a line protocol on a ServerSession.

``TOY LOGIN <user> <password> <client-id>`` opens a
:class:`~junction.brokercore.session.ServerSession` (the connection then shows
in the node's status with protocol TOY); ``TOY WHO`` answers ``TOY YOU <user>
<client-id> <node-id>`` from it; anything else is an error line.
"""

from __future__ import annotations

from twisted.protocols.basic import LineOnlyReceiver

from junction.brokercore.session import ConnectionInfo, ServerSession
from junction.edge.acceptor import AcceptorFactory
from tests.toyproto.opening import MAX_LINE, error_line


class ToyProtocol(LineOnlyReceiver):
    delimiter = b"\n"
    MAX_LENGTH = MAX_LINE

    def __init__(self, server, *, acceptor=None, limits=None, reactor=None):
        self.server = server
        self.acceptor = acceptor
        self.session = None

    def connectionMade(self):
        self.factory.connections.add(self)

    def lineReceived(self, line: bytes) -> None:
        words = line.decode("utf-8", "replace").split()
        if len(words) == 5 and words[:2] == ["TOY", "LOGIN"] and self.session is None:
            principal = self.server.security.authenticate(words[2], words[3])
            if principal is None:
                self._fail("login refused")
                return
            peer = self.transport.getPeer()
            info = ConnectionInfo(
                "TOY", f"{peer.host}:{peer.port}", client_id=words[4],
                acceptor=self.acceptor.name if self.acceptor else None,
            )
            self.session = ServerSession(self.server, principal, info)
            self.sendLine(b"TOY WELCOME")
        elif words == ["TOY", "WHO"] and self.session is not None:
            session = self.session
            self.sendLine(f"TOY YOU {session.user} {session.connection.client_id} {self.server.node_id}".encode())
        else:
            self._fail("unexpected line")

    def _fail(self, text: str) -> None:
        self.transport.write(error_line(text))
        self.transport.loseConnection()

    def connectionLost(self, reason=None):
        self.factory.connections.discard(self)
        if self.session is not None:
            self.session.close()
            self.session = None


class ToyFactory(AcceptorFactory):
    protocol_class = ToyProtocol
