"""proton's private API, as ``junction.brokercore.proton_private`` uses it, on the installed proton.

``proton_private`` is the one module that reaches under proton's public API
(``cproton``, ``cproton_ffi``, ``_impl``).  These tests pin it to the proton
release it was written for and exercise every name it exports on a real engine
pair -- a client ``Transport`` talking to a server ``Transport`` in memory --
so a proton upgrade that renames, drops or changes any of it fails here, by
name, and not somewhere in the AMQP adapter's hot path.
"""

from __future__ import annotations

from importlib.metadata import version

import proton
import pytest
from proton import Collector, Connection, Delivery, Event, Transport

from junction.brokercore import proton_private as pn


def test_the_installed_proton_is_the_release_the_module_was_written_for():
    written_for = ".".join(str(part) for part in pn.WRITTEN_FOR)
    assert tuple(proton.VERSION) == pn.WRITTEN_FOR, (
        f"proton {version('python-qpid-proton')} is installed; junction/brokercore/proton_private.py "
        f"was written for {written_for}: check each of its names against the new cproton, then move WRITTEN_FOR"
    )
    assert version("python-qpid-proton") == written_for


def test_every_exported_name_exists():
    missing = [name for name in pn.__all__ if not hasattr(pn, name)]
    assert missing == []


@pytest.mark.parametrize(
    "constant, public",
    [
        ("PN_DELIVERY", Event.DELIVERY.number),
        ("PN_LINK_FLOW", Event.LINK_FLOW.number),
        ("PN_CONNECTION_REMOTE_OPEN", Event.CONNECTION_REMOTE_OPEN.number),
        ("PN_SESSION_REMOTE_OPEN", Event.SESSION_REMOTE_OPEN.number),
        ("PN_LINK_REMOTE_OPEN", Event.LINK_REMOTE_OPEN.number),
        ("PN_LINK_REMOTE_CLOSE", Event.LINK_REMOTE_CLOSE.number),
        ("PN_LINK_REMOTE_DETACH", Event.LINK_REMOTE_DETACH.number),
        ("PN_SESSION_REMOTE_CLOSE", Event.SESSION_REMOTE_CLOSE.number),
        ("PN_CONNECTION_REMOTE_CLOSE", Event.CONNECTION_REMOTE_CLOSE.number),
        ("PN_TRANSPORT_ERROR", Event.TRANSPORT_ERROR.number),
        ("PN_TRANSPORT_CLOSED", Event.TRANSPORT_CLOSED.number),
        ("PN_TRANSPORT_TAIL_CLOSED", Event.TRANSPORT_TAIL_CLOSED.number),
        ("PN_ACCEPTED", int(Delivery.ACCEPTED)),
    ],
)
def test_constants_mean_what_the_public_api_says(constant, public):
    assert getattr(pn, constant) == public


class _Pair:
    """A client engine and a server engine joined in memory; the server side read raw."""

    def __init__(self):
        self.server = Transport(Transport.SERVER)
        self.server_conn = Connection()
        self.server_events = Collector()
        self.server_conn.collect(self.server_events)
        self.server.bind(self.server_conn)
        self.client = Transport()
        self.client_conn = Connection()
        self.client.bind(self.client_conn)
        self.client_conn.open()
        self.client_session = self.client_conn.session()
        self.client_session.open()

    def pump(self) -> None:
        for _ in range(20):
            moved = self._move(self.client, self.server) + self._move(self.server, self.client)
            if not moved:
                return

    @staticmethod
    def _move(source, sink) -> int:
        pending = source.pending()
        if pending <= 0:
            return 0
        data = source.peek(pending)
        source.pop(pending)
        sink.push(data)
        return len(data)

    def raw_events(self) -> list:
        """The server's waiting events as (type, raw pointer), read with the private calls, popped."""
        collector = pn.collector_pointer(self.server_events)
        seen = []
        while True:
            event = pn.collector_peek(collector)
            if event == pn.NULL:
                return seen
            seen.append((pn.event_type(event), event))
            if pn.event_type(event) in (pn.PN_DELIVERY, pn.PN_LINK_FLOW):
                # what the adapter reads of them, before the pop frees them
                seen[-1] = (pn.event_type(event), pn.event_delivery(event), pn.event_link(event))
            pn.collector_pop(collector)

    def open_server_side(self) -> None:
        """Open every endpoint the client opened, as the broker does."""
        self.pump()
        collector = pn.collector_pointer(self.server_events)
        while True:
            event = pn.collector_peek(collector)
            if event == pn.NULL:
                break
            etype = pn.event_type(event)
            if etype in (pn.PN_CONNECTION_REMOTE_OPEN, pn.PN_SESSION_REMOTE_OPEN, pn.PN_LINK_REMOTE_OPEN):
                wrapped = pn.wrap_event(event)
                assert isinstance(wrapped, Event)
                if etype == pn.PN_CONNECTION_REMOTE_OPEN:
                    endpoint = wrapped.connection
                elif etype == pn.PN_SESSION_REMOTE_OPEN:
                    endpoint = wrapped.session
                else:
                    endpoint = wrapped.link
                endpoint.open()
                if etype == pn.PN_LINK_REMOTE_OPEN:
                    endpoint.source.copy(endpoint.remote_source)
                    endpoint.target.copy(endpoint.remote_target)
                    self.server_link = endpoint
            pn.collector_pop(collector)
        self.pump()


def _attached(kind: str):
    """A pair whose client attached one link of ``kind`` ("sender"/"receiver"), opened by the server."""
    pair = _Pair()
    if kind == "sender":
        link = pair.client_session.sender("in")
        link.target.address = "q"
    else:
        link = pair.client_session.receiver("out")
        link.source.address = "q"
    link.open()
    pair.open_server_side()
    return pair, link


def test_event_type_names_are_text():
    assert pn.event_type_name(pn.PN_DELIVERY) == "PN_DELIVERY"
    assert pn.event_type_name(pn.PN_LINK_FLOW) == "PN_LINK_FLOW"


def test_a_transfer_from_the_client_read_with_the_raw_calls():
    pair, sender = _attached("sender")
    link = pn.link_pointer(pair.server_link)
    assert pn.link_credit(link) == 0
    pn.link_flow(link, 5)
    pair.pump()
    assert sender.credit == 5 and pn.link_credit(link) == 5

    delivery = sender.delivery(b"tag-1")
    sender.send(b"first part ")
    pair.pump()
    (etype, dlv, _), *_ = [e for e in pair.raw_events() if e[0] == pn.PN_DELIVERY]
    assert etype == pn.PN_DELIVERY
    assert pn.delivery_link(dlv) == link
    assert pn.delivery_partial(dlv) and not pn.delivery_aborted(dlv)
    sender.send(b"and the rest")
    sender.advance()
    pair.pump()
    pair.raw_events()
    assert not pn.delivery_partial(dlv)
    assert pn.delivery_readable(dlv)
    pending = pn.delivery_pending(dlv)
    assert pending == len(b"first part and the rest")
    count, data = pn.link_recv(link, pending)
    assert count == pending and bytes(data) == b"first part and the rest"
    assert pn.link_advance(link)
    assert not pn.delivery_remote_settled(dlv) and pn.delivery_remote_state(dlv) == 0
    assert isinstance(pn.wrap_delivery(dlv), Delivery) and pn.wrap_delivery(dlv).tag == "tag-1"

    pn.delivery_update(dlv, pn.PN_ACCEPTED)
    pn.delivery_settle(dlv)
    pair.pump()
    assert delivery.remote_state == Delivery.ACCEPTED and delivery.settled


def test_the_remote_state_and_settlement_of_a_transfer():
    pair, sender = _attached("sender")
    link = pn.link_pointer(pair.server_link)
    pn.link_flow(link, 2)
    pair.pump()
    delivery = sender.delivery(b"t")
    sender.send(b"x")
    sender.advance()
    delivery.update(Delivery.ACCEPTED)
    delivery.settle()
    pair.pump()
    (_, dlv, _), *_ = [e for e in pair.raw_events() if e[0] == pn.PN_DELIVERY]
    assert pn.delivery_remote_settled(dlv)
    assert pn.delivery_remote_state(dlv) == pn.PN_ACCEPTED


def test_an_aborted_transfer():
    pair, sender = _attached("sender")
    pn.link_flow(pn.link_pointer(pair.server_link), 1)
    pair.pump()
    delivery = sender.delivery(b"t")
    sender.send(b"partial")
    pair.pump()
    delivery.abort()
    pair.pump()
    dlvs = [e[1] for e in pair.raw_events() if e[0] == pn.PN_DELIVERY]
    assert dlvs and pn.delivery_aborted(dlvs[-1])


def test_a_transfer_to_the_client_written_with_the_raw_calls():
    pair, receiver = _attached("receiver")
    link = pn.link_pointer(pair.server_link)
    receiver.flow(3)
    pair.pump()
    flows = [e for e in pair.raw_events() if e[0] == pn.PN_LINK_FLOW]
    assert flows and flows[-1][2] == link
    assert pn.link_credit(link) == 3 and not pn.link_get_drain(link)

    dlv = pn.new_delivery(link, pn.delivery_tag(b"1"))
    payload = b"hello"
    assert pn.link_send(link, pn.buffer_of(payload), len(payload)) == len(payload)
    assert pn.link_advance(link)
    pn.delivery_settle(dlv)
    pair.pump()
    incoming = receiver.current
    assert incoming is not None and incoming.tag in (b"1", "1")  # proton hands tags back as text
    assert receiver.recv(incoming.pending) == payload
    assert pn.link_credit(link) == 2


def test_drain_is_seen_and_answered():
    pair, receiver = _attached("receiver")
    link = pn.link_pointer(pair.server_link)
    receiver.drain(4)
    pair.pump()
    pair.raw_events()
    assert pn.link_get_drain(link) and pn.link_credit(link) == 4
    assert pn.link_drained(link) == 4
    pair.pump()
    assert receiver.credit == 0 and pn.link_credit(link) == 0
