"""The gateway answers an AMQP client's protocol headers at once, as a broker does.

Several AMQP 1.0 client libraries (by default, or with pipelining off) send
nothing after their AMQP header until the server's header has arrived.  The
gateway must therefore write its SASL header (with sasl-mechanisms) as soon
as it has read the client's SASL header, and its AMQP header as soon as it
has read the client's AMQP header -- before the client's Open, which is what
the gateway routes on.  Once the connection is joined to a broker core the
core's own AMQP header is consumed by the gateway, so the client sees
exactly one.

The client here is a bare socket that speaks one step at a time and waits,
with a deadline, for each answer before sending more; frames are encoded and
decoded with proton's codec (``proton.Data``), not Junction's.  The world: a
broker core (``core1``, with a ``gateway-in`` STOMP+AMQP acceptor) and a
gateway node whose router keys on the container-id (``CLIENT_ID``), serves
``local-*`` container-ids with its own broker core and forwards the others
to ``core1`` (``routerMode=forward``).  Both paths are run with SASL PLAIN
and without SASL (the nodes allow anonymous logins), then with
python-qpid-proton's ``BlockingConnection`` to show its clients still work.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from types import SimpleNamespace

import proton
import pytest
from proton import Described, Message, symbol, uint, ulong
from proton.utils import BlockingConnection

from tests.harness import BrokerProcess, wait_for
from tests.integration.test_gateway_routing import (
    PASSWORDS,
    amqp_connection_on,
    make_core,
    make_gateway,
    new_id,
    router_xml,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
#: seconds the client waits for any one answer (the gateway's opening deadline is 10 s)
ANSWER_WAIT = 5.0
#: seconds any one expected thing in the world may take
TIMEOUT = 15.0

_SASL_MECHANISMS, _SASL_INIT, _SASL_OUTCOME = 0x40, 0x41, 0x44
_OPEN, _BEGIN, _CLOSE = 0x10, 0x11, 0x18


# --------------------------------------------------------------------------- a client that waits


def encode(code: int, fields: list) -> bytes:
    data = proton.Data()
    data.put_object(Described(ulong(code), fields))
    return bytes(data.encode())


def decode(body: bytes) -> Described:
    data = proton.Data()
    data.decode(body)
    data.rewind()
    data.next()
    return data.get_object()


def frame(body: bytes, ftype: int = 0) -> bytes:
    return (8 + len(body)).to_bytes(4, "big") + bytes((2, ftype, 0, 0)) + body


class WaitingClient:
    """An AMQP 1.0 client on a bare socket that sends nothing before the answer it waits for.

    ``received`` is every byte the server sent, in order.
    """

    def __init__(self, address) -> None:
        self.sock = socket.create_connection(address, timeout=ANSWER_WAIT)
        self.received = bytearray()
        self._pos = 0

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self, n: int, what: str) -> bytes:
        """Exactly ``n`` more bytes from the server, within ANSWER_WAIT seconds per read."""
        while len(self.received) - self._pos < n:
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                raise AssertionError(
                    f"no {what} from the server within {ANSWER_WAIT:g} s "
                    f"(received so far: {bytes(self.received)!r})"
                ) from None
            if not chunk:
                raise AssertionError(
                    f"the server closed the connection before {what} "
                    f"(received: {bytes(self.received)!r})"
                )
            self.received += chunk
        data = bytes(self.received[self._pos : self._pos + n])
        self._pos += n
        return data

    def read_frame(self, what: str) -> tuple[int, Described]:
        """The next non-empty frame: (frame type, its performative)."""
        while True:
            size = int.from_bytes(self.read(4, what), "big")
            assert 8 <= size <= 1 << 20, f"{what}: not a frame (size octets {size:#x})"
            rest = self.read(size - 4, what)
            doff, ftype = rest[0], rest[1]
            body = rest[doff * 4 - 4 :]
            if body:
                return ftype, decode(body)

    def at_eof(self) -> bool:
        """Whether the server closed the connection (waiting up to ANSWER_WAIT for it)."""
        try:
            return self.sock.recv(1) == b""
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def open_waiting(address, container_id: str, *, sasl: bool) -> tuple[WaitingClient, Described]:
    """Open a connection one step at a time; the client and the server's Open."""
    client = WaitingClient(address)
    try:
        if sasl:
            client.send(SASL_HEADER)
            assert client.read(8, "SASL header") == SASL_HEADER
            ftype, mechanisms = client.read_frame("sasl-mechanisms")
            assert (ftype, mechanisms.descriptor) == (1, _SASL_MECHANISMS)
            offered = mechanisms.value[0]
            assert symbol("PLAIN") in (offered if isinstance(offered, list | proton.Array) else [offered])
            response = f"\0app\0{PASSWORDS['app']}".encode()
            client.send(frame(encode(_SASL_INIT, [symbol("PLAIN"), response]), ftype=1))
            ftype, outcome = client.read_frame("sasl-outcome")
            assert (ftype, outcome.descriptor, outcome.value[0]) == (1, _SASL_OUTCOME, 0)
        sasl_bytes = len(client.received)
        client.send(AMQP_HEADER)
        # The point: nothing more is sent until the server's AMQP header is here.
        assert client.read(8, "AMQP header (sent before the client's Open)") == AMQP_HEADER
        client.send(frame(encode(_OPEN, [container_id, "localhost"])))
        ftype, server_open = client.read_frame("Open")
        assert (ftype, server_open.descriptor) == (0, _OPEN), server_open
        after_sasl = bytes(client.received[sasl_bytes:])
        assert after_sasl.count(AMQP_HEADER) == 1, after_sasl
        return client, server_open
    except BaseException:
        client.close()
        raise


# --------------------------------------------------------------------------- the world


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[SimpleNamespace]:
    """core1, and a gateway serving ``local-*`` itself and forwarding the rest to core1."""
    made: list[BrokerProcess] = []

    def factory(name: str, **kwargs) -> BrokerProcess:
        b = BrokerProcess(tmp_path_factory.mktemp("amqp-header"), name=name, **kwargs)
        made.append(b)
        return b

    try:
        core1 = make_core(factory, "core1").start()
        routers = {"r": router_xml("r", key="CLIENT_ID", local_filter="local-.*", pool=[core1])}
        gateway = make_gateway(
            factory, "gateway", [core1], routers, protocols={"r": "STOMP,AMQP;routerMode=forward"}
        ).start()
        wait_ready(gateway, "r", core1=True)
        yield SimpleNamespace(core1=core1, gateway=gateway, address=gateway.routed["r"], made=made)
    finally:
        for b in reversed(made):
            b.stop()


@pytest.fixture
def nodes(request, world) -> SimpleNamespace:
    request.node._junction_brokers = list(world.made)  # log tails with a failure report
    return world


def served_by(world: SimpleNamespace, container_id: str) -> BrokerProcess:
    """The one node listing the connection of ``container_id``."""
    found = wait_for(
        lambda: [n for n in (world.gateway, world.core1) if amqp_connection_on(n, container_id)] or None,
        TIMEOUT,
        what=f"{container_id} on a node",
    )
    assert len(found) == 1, [n.name for n in found]
    return found[0]


# --------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("sasl", [True, False], ids=["sasl-plain", "no-sasl"])
@pytest.mark.parametrize("route", ["forwarded", "local"])
def test_a_client_waiting_for_each_header_opens_through_the_gateway(nodes, route, sasl):
    prefix = "local" if route == "local" else "remote"
    container_id = new_id(f"{prefix}-waiting-{'sasl' if sasl else 'bare'}")
    client, server_open = open_waiting(nodes.address, container_id, sasl=sasl)
    try:
        # the Open is the serving core's own, not the gateway's refusal (which precedes a Close)
        properties = server_open.value[9] if len(server_open.value) > 9 else None
        assert symbol("amqp:connection-establishment-failed") not in (properties or {}), server_open
        # a session (the nodes list connections that have one): the joined connection carries on
        client.send(frame(encode(_BEGIN, [None, uint(0), uint(1024), uint(1024)])))
        ftype, begin = client.read_frame("Begin")
        assert (ftype, begin.descriptor) == (0, _BEGIN), begin
        expected = nodes.gateway if route == "local" else nodes.core1
        node = served_by(nodes, container_id)
        assert node is expected, node.name
        assert amqp_connection_on(node, container_id)["user"] == ("app" if sasl else "guest")
        # a Close is answered by the core, and the socket closed
        client.send(frame(encode(_CLOSE, [])))
        ftype, close = client.read_frame("Close")
        assert (ftype, close.descriptor) == (0, _CLOSE) and not close.value, close
        assert client.at_eof()
        assert bytes(client.received).count(AMQP_HEADER) == 1
    finally:
        client.close()


@pytest.mark.parametrize("route", ["forwarded", "local"])
def test_proton_blocking_connection_through_the_gateway(nodes, route):
    container_id = new_id("local-proton" if route == "local" else "remote-proton")
    host, port = nodes.address
    conn = BlockingConnection(
        f"amqp://{host}:{port}",
        timeout=TIMEOUT,
        container_id=container_id,
        user="app",
        password=PASSWORDS["app"],
        allowed_mechs="PLAIN",
        allow_insecure_mechs=True,
    )
    try:
        queue = new_id(f"header-{route}")
        sender = conn.create_sender(queue)
        receiver = conn.create_receiver(queue, credit=5)
        node = served_by(nodes, container_id)
        assert node is (nodes.gateway if route == "local" else nodes.core1)
        for i in range(3):
            sender.send(Message(body=f"m{i}", durable=True))
        got = []
        for _ in range(3):
            got.append(receiver.receive(timeout=TIMEOUT).body)
            receiver.accept()
        assert got == ["m0", "m1", "m2"]
        receiver.close()
        sender.close()
    finally:
        conn.close()
