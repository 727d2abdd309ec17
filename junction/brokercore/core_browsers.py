"""Browse-only CORE consumers (the JMS ``QueueBrowser``): the queue's messages shown, none taken.

SESS_CREATECONSUMER with ``browseOnly`` makes a :class:`CoreBrowser` instead of a consumer of
the queue: it takes a snapshot of the references waiting in the queue when it is created
(highest priority first, in order, those its selector matches, at most
:data:`MAX_BROWSE_SNAPSHOT`) and sends them as SESS_RECEIVE_MSG under the same byte credits
as a consumer (SESS_FLOWTOKEN), only while the session is started.  The messages stay in
the queue for its consumers: a browser's acknowledgements are ignored and closing it gives
nothing back, as Artemis's browse-only ``ServerConsumerImpl``.  A forced delivery
(``receiveNoWait``, which the JMS enumeration uses) sends what the credit allows, then the
marker, so the client knows when the snapshot is exhausted.

Departures from Artemis, on purpose: Artemis's browser walks the queue live (it also shows
messages that arrive while it browses) and includes paged messages; this one shows the
messages in memory when it was created.
"""

from __future__ import annotations

from junction.brokercore.core_convert import to_core
from junction.model import errors
from junction.model.filter.expression import FilterError, parse_filter
from junction.protocols.core import encode_packet
from junction.protocols.core import packets as p

__all__ = ["CoreBrowser", "MAX_BROWSE_SNAPSHOT"]

#: References one browser's snapshot holds at most (the rest of a longer queue is not shown).
MAX_BROWSE_SNAPSHOT = 100_000


class CoreBrowser:
    """One browse-only consumer of a CORE session (see the module doc).  It answers what the
    session asks of a :class:`~junction.brokercore.core_consumers.CoreConsumer`."""

    __slots__ = ("core", "id", "queue", "credit", "pending", "tx_acked", "delivering")

    def __init__(self, core, consumer_id: int, queue, selector: str | None):
        self.core = core
        self.id = consumer_id
        self.queue = queue.name
        try:
            matches = parse_filter(selector).matches
        except FilterError as exc:
            raise errors.InvalidFilterError(f"invalid selector {selector!r}: {exc}") from exc
        snapshot = []
        for ref in queue.waiting():
            if len(snapshot) >= MAX_BROWSE_SNAPSHOT:
                break
            if matches(ref.message):
                snapshot.append(ref)
        snapshot.reverse()
        #: the references still to show, the next last
        self.pending = snapshot
        #: byte credit (None: unlimited); nothing is sent before the client's SESS_FLOWTOKEN
        self.credit: int | None = 0
        self.tx_acked = 0
        #: a browser holds nothing (what SESS_EXPIRED looks up)
        self.delivering: dict = {}

    def flow(self, credits: int) -> None:
        if credits == -1:
            self.credit = None
        elif credits == 0:
            self.credit = 0
        elif self.credit is not None:
            self.credit += credits
        self.pump()

    def pump(self) -> None:
        """Send what the credit allows, while the session is started and the transport takes more."""
        core = self.core
        pending = self.pending
        while pending and (self.credit is None or self.credit > 0):
            if core.closed or not core.started or core.protocol.paused:
                return
            ref = pending.pop()
            body, headers = to_core(ref.message)
            data = encode_packet(p.SessReceiveMsg(body, headers, self.id, ref.delivery_count + 1, channel_id=core.channel))
            if self.credit is not None:
                self.credit -= len(data)
            core.protocol.write(data)

    def deliver_now(self) -> None:
        self.pump()

    def acknowledge(self, message_id: int, *, individual: bool, tx):
        """A browser takes nothing: its acknowledgements change nothing (Artemis ignores them)."""
        return None

    def give_back(self) -> None:
        """A browser holds nothing to give back."""

    def close(self) -> None:
        self.pending = []
