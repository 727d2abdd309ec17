"""AMQP local transactions: the coordinator link of a session.

A client attaches a link whose target is the coordinator, sends it
``declare`` (answered with ``declared`` and a new transaction id) and later
``discharge`` (commit, or roll back with ``fail``).  Each transaction is a
:class:`junction.brokercore.session.Transaction` of the AMQP session's broker
session; transfers and dispositions name it in a ``transactional-state``
(see :mod:`junction.brokercore.amqp_links`).
"""

from __future__ import annotations

from proton import Condition, Delivery, Terminus

from junction.brokercore.proton_private import link_pointer, wrap_delivery
from junction.protocols.amqp import message as sections_codec
from junction.protocols.amqp.types import Described as AmqpDescribed
from junction.protocols.amqp.types import Scalar

__all__ = ["Coordinator", "descriptor_code", "txid_of"]

#: transactional-state, declared, declare and discharge descriptors
TRANSACTIONAL_STATE = 0x34
DECLARED = 0x33
DECLARE = 0x31
DISCHARGE = 0x32
ACCEPTED_CODE = 0x24


class Coordinator:
    """The transaction coordinator link of a session: declare and discharge."""

    closed = False

    def __init__(self, protocol, sctx, link):
        self.protocol = protocol
        self.sctx = sctx
        self.link = link
        link.source.copy(link.remote_source)
        link.target.type = Terminus.COORDINATOR
        link.target.copy(link.remote_target)
        self.link_impl = link_pointer(link)
        link.context = self
        sctx.links.add(self)
        protocol.links[self.link_impl] = self
        link.open()
        link.flow(protocol.credits)

    def on_delivery(self, dlv) -> None:
        dlv = wrap_delivery(dlv)
        link = self.link
        if dlv.partial or not dlv.readable:
            return
        data = link.recv(dlv.pending)
        link.advance()
        session = self.sctx.session
        try:
            sections = sections_codec.decode_message(data)
            body = sections.body[0][1] if sections.body else None
            if not isinstance(body, AmqpDescribed):
                raise ValueError("a coordinator message must carry a declare or discharge")
            code = descriptor_code(body.descriptor)
            fields = list(body.value or [])
        except ValueError as exc:
            self._reject(dlv, "amqp:decode-error", str(exc))
            return
        if code == DECLARE:
            tx = session.begin()
            txid = self.sctx.new_txid()
            self.sctx.transactions[txid] = tx
            dlv.local.data = [txid]
            dlv.update(DECLARED)
            dlv.settle()
        elif code == DISCHARGE:
            txid = txid_of(fields)
            fail = bool(fields[1]) if len(fields) > 1 else False
            tx = self.sctx.transactions.pop(txid, None)
            if tx is None:
                self._reject(dlv, "amqp:transaction:unknown-id", f"unknown transaction id {txid!r}")
                return
            if fail:
                session.rollback(tx)
                dlv.update(Delivery.ACCEPTED)
                dlv.settle()
                return
            d = session.commit(tx)
            d.addCallbacks(self._committed, self._commit_failed, callbackArgs=(dlv,), errbackArgs=(dlv,))
        else:
            self._reject(dlv, "amqp:not-implemented", f"coordinator message {code!r} is not supported")
        if link.credit <= self.protocol.low_credits:
            link.flow(self.protocol.credits - link.credit)

    def on_flow(self) -> None:
        pass

    def _committed(self, _, dlv) -> None:
        if self.closed:
            return
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
        self.protocol.flush_soon()

    def _commit_failed(self, failure, dlv) -> None:
        if self.closed:
            return None
        self._reject(dlv, "amqp:transaction:rollback", f"transaction rolled back: {failure.getErrorMessage()}")
        self.protocol.flush_soon()
        return None

    def _reject(self, dlv, name: str, text: str) -> None:
        dlv.local.condition = Condition(name, text)
        dlv.update(Delivery.REJECTED)
        dlv.settle()

    def close(self, remote_close: bool) -> None:
        self.closed = True
        self.sctx.links.discard(self)
        self.protocol.links.pop(self.link_impl, None)


def descriptor_code(descriptor):
    """DECLARE, DISCHARGE or another descriptor code, from a coordinator message's body."""
    if isinstance(descriptor, Scalar):
        return descriptor.value
    if isinstance(descriptor, int):
        return descriptor
    return {"amqp:declare:list": DECLARE, "amqp:discharge:list": DISCHARGE}.get(str(descriptor))


def txid_of(data) -> bytes | None:
    """The transaction id that opens ``data`` (a declared or transactional-state list), as bytes."""
    if not data:
        return None
    value = data[0]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return None
