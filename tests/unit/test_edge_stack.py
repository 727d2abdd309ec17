"""An acceptor's listener stack (junction.edge.stack), built from acceptors the loader read.

The layers are put around the acceptor's own factory from the inside out --
TLS, the PROXY protocol, the per-source limits -- each only when the URL asks
for it, and the port listens with the acceptor's backlog.  The node asks for
the stack and builds none of its layers itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trustme
from twisted.internet.protocol import Factory
from twisted.internet.testing import MemoryReactorClock

from junction.config.loader import parse_config
from junction.edge.acceptor import MultiProtocolFactory, ProxyProtocolFactory
from junction.edge.admission import AdmissionFactory
from junction.edge.stack import DEFAULT_BACKLOG, build_stack, listen, serving_factory
from junction.edge.tls import TLSAcceptorFactory
from tests.unit.test_config import core


@pytest.fixture(scope="module")
def key_store(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("pki") / "server.pem"
    trustme.CA().issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(path))
    return str(path)


def acceptor(params: str = ""):
    """The acceptor ``tcp://127.0.0.1:61613?protocols=STOMP;<params>`` as the loader reads it."""
    url = "tcp://127.0.0.1:61613?protocols=STOMP" + (";" + params if params else "")
    config = parse_config(core(f"<acceptors><acceptor name='a'>{url}</acceptor></acceptors>"), file="b.xml", env={})
    (found,) = config.acceptors
    return found


def stack_of(params: str = ""):
    inner = Factory()
    return inner, build_stack(inner, acceptor(params), reactor=MemoryReactorClock(), connect_timeout=3.0)


def test_one_protocol_is_served_by_its_own_factory_several_by_a_sniffing_one():
    stomp, amqp = Factory(), Factory()
    reactor = MemoryReactorClock()
    assert serving_factory({"STOMP": stomp}, reactor=reactor, acceptor_name="a", sniff_timeout=2.0) is stomp
    multi = serving_factory({"STOMP": stomp, "AMQP": amqp}, reactor=reactor, acceptor_name="a", sniff_timeout=2.0)
    assert isinstance(multi, MultiProtocolFactory)
    assert multi.factories == {"STOMP": stomp, "AMQP": amqp}
    assert (multi.acceptor_name, multi.sniff_timeout, multi.reactor) == ("a", 2.0, reactor)


def test_a_plain_acceptor_listens_with_its_own_factory():
    inner, stack = stack_of()
    assert (stack.factory, stack.listening, stack.tls, stack.admission, stack.described) == (inner, inner, None, None, "")


def test_the_layers_go_tls_then_proxy_then_admission_from_the_inside_out(key_store):
    inner, stack = stack_of(
        f"sslEnabled=true;keyStorePath={key_store};handshakesAllowed=7;proxyProtocolEnabled=true;"
        "connectionsAllowedPerAddress=5;connectionRatePerAddress=2.5"
    )
    admission = stack.listening
    assert isinstance(admission, AdmissionFactory) and stack.admission is admission
    assert (admission.per_address, admission.rate, admission.acceptor_name) == (5, 2.5, "a")
    proxy = admission.wrappedFactory
    assert isinstance(proxy, ProxyProtocolFactory) and proxy.timeout == 3.0
    tls = proxy.wrapped
    assert isinstance(tls, TLSAcceptorFactory) and stack.tls is tls
    assert tls.handshakes_allowed == 7 and tls.wrappedFactory is inner
    assert stack.factory is inner
    assert stack.described == " over TLS behind the PROXY protocol"


def test_each_layer_alone():
    inner, stack = stack_of("proxyProtocolEnabled=true")
    assert isinstance(stack.listening, ProxyProtocolFactory) and stack.listening.wrapped is inner
    assert (stack.tls, stack.admission, stack.described) == (None, None, " behind the PROXY protocol")
    inner, stack = stack_of("connectionRatePerAddress=1")
    assert isinstance(stack.listening, AdmissionFactory) and stack.listening.wrappedFactory is inner
    assert stack.admission is stack.listening and stack.described == ""


@pytest.mark.parametrize(("params", "backlog"), [("", DEFAULT_BACKLOG), ("backlog=-1", DEFAULT_BACKLOG), ("backlog=64", 64)])
def test_listen_on_the_acceptor_s_address_with_its_backlog(params, backlog):
    reactor = MemoryReactorClock()
    found = acceptor(params)
    stack = build_stack(Factory(), found, reactor=reactor, connect_timeout=3.0)
    listen(stack, found, reactor=reactor)
    ((port, factory, listened_backlog, interface),) = reactor.tcpServers
    assert (port, factory, listened_backlog, interface) == (61613, stack.listening, backlog, "127.0.0.1")


def test_the_node_asks_edge_for_the_stack_and_builds_no_layer_itself():
    text = (Path(__file__).resolve().parents[2] / "junction" / "node" / "listeners.py").read_text()
    layers = r"MultiProtocolFactory|wrap_tls|wrap_proxy_protocol|wrap_admission|listenTCP|listen_backlog|backlog="
    assert re.findall(layers, text) == []
