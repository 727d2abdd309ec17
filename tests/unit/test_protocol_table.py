"""The protocol table (junction.protocols.registry): its rows, its entry points, its users."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
from twisted.internet import error
from twisted.python.failure import Failure

import junction.edge.acceptor as acceptor_module
from junction.brokercore.stomp_server import StompFactory, StompProtocol
from junction.config.model import Limits
from junction.edge.acceptor import MultiProtocolFactory
from junction.gateway.forward import FORWARD_BUFFER_SIZE
from junction.gateway.listener import REDIRECTING_PROTOCOLS, ROUTED_PROTOCOLS
from junction.node.listeners import PROTOCOL_FACTORIES, SERVED_PROTOCOLS
from junction.protocols import registry
from junction.protocols.detect import MAX_SNIFF_BYTES, UNKNOWN, detect
from tests.toyproto import ENTRY, write_dist_info
from tests.unit.stomp_fixtures import Broker
from tests.unit.test_gateway_listener import Gateway, connect_frame


def test_built_in_rows_in_detection_order():
    assert [e.name for e in registry.BUILT_IN] == ["CLUSTER", "AMQP", "STOMP", "CORE", "MQTT", "OPENWIRE"]
    rows = {e.name: (e.gateway is not None, e.redirects, e.adapter is not None) for e in registry.BUILT_IN}
    assert rows == {
        "CLUSTER": (False, False, False),
        "AMQP": (True, True, True),
        "STOMP": (True, False, True),
        "CORE": (True, True, True),
        "MQTT": (False, False, False),
        "OPENWIRE": (True, True, True),
    }


def test_the_three_lists_come_from_the_table():
    assert SERVED_PROTOCOLS == frozenset({"STOMP", "AMQP", "CORE", "OPENWIRE"})
    assert ROUTED_PROTOCOLS == frozenset({"STOMP", "AMQP", "CORE", "OPENWIRE"})
    assert REDIRECTING_PROTOCOLS == frozenset({"AMQP", "CORE", "OPENWIRE"})
    assert PROTOCOL_FACTORIES["STOMP"] is StompFactory
    assert PROTOCOL_FACTORIES["AMQP"].__name__ == "AmqpFactory"
    assert PROTOCOL_FACTORIES["CORE"].__name__ == "CoreFactory"


def test_every_dotted_path_loads():
    for entry in registry.BUILT_IN:
        assert callable(registry.load(entry.detector))
        for path in (entry.gateway, entry.adapter):
            if path is not None:
                assert isinstance(registry.load(path), type)


def test_entries_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        registry.BUILT_IN[0].name = "X"  # type: ignore[misc]


def test_acceptor_part_defaults_to_the_name_when_served():
    assert registry.protocol("STOMP").part == "STOMP"
    assert registry.protocol("CORE").part == "CORE"
    assert registry.protocol("OPENWIRE").part == "OPENWIRE"
    assert registry.protocol("MQTT").part is None
    assert dataclasses.replace(ENTRY, acceptor_part="STOMP").part == "STOMP"


@pytest.fixture
def toy_registered(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(write_dist_info(tmp_path)))
    registry.protocol_table(reload=True)
    yield
    monkeypatch.undo()
    registry.protocol_table(reload=True)


def test_an_entry_point_adds_a_protocol_after_the_built_ins(toy_registered):
    table = registry.protocol_table()
    assert [e.name for e in table][-1] == "TOY" and table[-1] == ENTRY
    assert detect(b"TOY LOGIN a b c\n") == "TOY"
    assert detect(b"TO") == "need-more"
    assert detect(b"CONNECT\n") == "STOMP"  # the built-ins keep their verdicts
    assert "TOY" in registry.served() and "TOY" in registry.routed() and "TOY" not in registry.redirecting()


def test_without_the_entry_point_toy_is_unknown():
    assert registry.protocol("TOY") is None
    assert detect(b"TOY LOGIN a b c\n") == UNKNOWN


def test_a_connection_kept_local_on_a_multi_protocol_acceptor_is_sniffed_once(monkeypatch):
    sniffs = []

    def counting_detect(data):
        sniffs.append(bytes(data))
        return detect(data)

    monkeypatch.setattr(acceptor_module, "detect", counting_detect)
    broker = Broker(users={"alice": ("secret", {"admin"})})
    stomp = StompFactory(broker.server, acceptor=None, limits=Limits(), reactor=broker.clock)
    local = MultiProtocolFactory({"STOMP": stomp}, reactor=broker.clock, acceptor_name="routed", sniff_timeout=10)
    g = Gateway(local_factory=local)
    c = g.client()
    c.send(connect_frame(accept_version="1.2", login="alice", passcode="secret", client_id="local-1"))
    (connected,) = c.frames()
    assert connected.command == "CONNECTED"
    assert isinstance(c.transport.protocol, StompProtocol) and len(stomp.connections) == 1
    assert sniffs == []  # the gateway's verdict was passed down, not sniffed again
    c.transport.protocol.connectionLost(Failure(error.ConnectionDone()))


def test_the_gateway_listener_and_the_broker_server_name_no_protocol():
    root = Path(__file__).resolve().parents[2] / "junction"
    names = re.compile(r'"STOMP"|"AMQP"|"CORE"|Stomp|Amqp|\bCore[A-Z]|core_')
    for path in (root / "gateway" / "listener.py", root / "brokercore" / "server.py"):
        assert not names.findall(path.read_text()), path


def test_the_gateway_listener_names_no_protocol_in_any_case_not_even_in_its_docstrings():
    text = (Path(__file__).resolve().parents[2] / "junction" / "gateway" / "listener.py").read_text()
    assert re.findall(r"(?i)stomp|amqp", text) == []


def test_stomp_s_entry_names_the_parameter_bounding_its_opening_frame():
    assert registry.protocol("STOMP").frame_size_param == "stompMaxFramePayloadLength"
    assert [e.name for e in registry.BUILT_IN if e.frame_size_param] == ["STOMP"]
    assert registry.frame_size_params() == ("stompMaxFramePayloadLength",)


def _gateway(**kwargs):
    g = Gateway(limits=Limits(max_frame_size=4096), **kwargs)
    g.factory.close_all()
    g.stop()
    return g.factory


@pytest.mark.parametrize(
    ("params", "frame", "buffered"),
    [
        ({}, 4096, 4096 + MAX_SNIFF_BYTES + FORWARD_BUFFER_SIZE),
        ({"stompMaxFramePayloadLength": "1000"}, 1000, 1000 + MAX_SNIFF_BYTES + FORWARD_BUFFER_SIZE),
        ({"stompMaxFramePayloadLength": "9000"}, 9000, 9000 + MAX_SNIFF_BYTES + FORWARD_BUFFER_SIZE),
        ({"stompMaxFramePayloadLength": "1000", "routingMaxBytes": "5000"}, 1000, 5000),
    ],
)
def test_a_gateway_listener_bounds_stomp_s_opening_by_its_frame_size_parameter(params, frame, buffered):
    """stompMaxFramePayloadLength, else <limits max-frame-size>; routingMaxBytes defaults to it plus a read."""
    factory = _gateway(params=params)
    assert factory.side("STOMP").limits.max_frame_size == frame
    assert factory.max_buffered == buffered


def test_a_protocol_s_frame_size_parameter_comes_from_its_entry(monkeypatch):
    """A new entry's parameter bounds its side's openings, and the buffer the largest of them."""
    toy = dataclasses.replace(ENTRY, frame_size_param="toyMaxLineLength")
    monkeypatch.setattr(registry, "_table", registry.BUILT_IN + (toy,))
    factory = _gateway(
        protocols=frozenset({"STOMP", "TOY"}),
        params={"toyMaxLineLength": "7000", "stompMaxFramePayloadLength": "1000"},
    )
    assert factory.side("TOY").max_frame == 7000
    assert factory.side("STOMP").max_frame == factory.side("STOMP").limits.max_frame_size == 1000
    assert factory.max_buffered == 7000 + MAX_SNIFF_BYTES + FORWARD_BUFFER_SIZE
    assert _gateway(protocols=frozenset({"TOY"})).side("TOY").max_frame == 4096


def test_registry_module_has_no_twisted():
    assert "twisted" not in sys.modules["junction.protocols.registry"].__dict__


def test_the_packages_own_entry_points_give_the_same_table(tmp_path, monkeypatch):
    """setup.cfg registers every built-in row; installed, they merge over the defaults unchanged."""
    import configparser

    setup = configparser.ConfigParser()
    setup.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    lines = setup["options.entry_points"][registry.ENTRY_POINT_GROUP]
    dist = tmp_path / "junction_builtins-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: junction-builtins\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\n{lines}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        names = [line.split("=")[0].strip() for line in lines.strip().splitlines()]
        assert names == [e.name for e in registry.BUILT_IN]
        assert registry.protocol_table(reload=True) == registry.BUILT_IN
    finally:
        monkeypatch.undo()
        registry.protocol_table(reload=True)
