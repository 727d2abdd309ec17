"""The relay: spliced TCP connections copied on a thread of their own, off the reactor.

Once a forwarded connection's opening has been replayed nothing is parsed
any more: every byte one side sends is written to the other.  Done by the
reactor (:class:`~junction.gateway.forward.Splice`), each chunk costs an
event-loop pass with Twisted's per-event bookkeeping, about twice what the
copy itself needs when messages come one at a time (``bench/relay_hop.py``:
87 against 43 us of CPU per record at 2,000 records/s).  So a splice
between two plain TCP connections is handed to the :class:`RelayEngine`:
one thread per gateway process with an ``epoll`` loop of its own, which
only moves bytes.  Connections with anything else between the gateway and
the socket (TLS, a PROXY-protocol wrapper) stay with the reactor.

The engine keeps the splice's guarantees:

* **Backpressure.**  A side is read only while what it sent before has been
  written to the other side: per direction at most one read,
  :data:`RELAY_READ_SIZE` bytes, waits in memory, and a slow reader slows
  the writer through TCP flow control.
* **Half-close propagated.**  End of stream from one side becomes a write
  shutdown toward the other once the bytes before it are written; the pair
  is closed once both directions are finished.
* **Abort propagated.**  A reset or error on one side resets the other
  (``SO_LINGER`` 0, pending bytes dropped), as a direct connection would
  have seen.
* **Accounting.**  When a pair is finished the splice learns it on the
  reactor thread (``reactor.callFromThread``), with the bytes moved each way,
  and fires its ``closed`` Deferred as before.

Taking a connection away from Twisted: the engine keeps a duplicate of the
socket's descriptor, tells the transport not to shut the socket down when it
closes (Twisted's ``_shouldShutdown``), and closes the transport: Twisted
closes only its own descriptor, and the connection lives on in the engine.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import select
import socket
import struct
import threading

from junction.gateway.forward import idle_tcp

__all__ = ["RELAY_READ_SIZE", "RelayEngine", "relayable"]

log = logging.getLogger("junction.gateway.relay")

#: bytes read at once from one side; also the most that waits per direction
RELAY_READ_SIZE = 64 * 1024

_IN, _OUT = select.EPOLLIN, select.EPOLLOUT
_LINGER_RESET = struct.pack("ii", 1, 0)


def relayable(transport) -> bool:
    """Whether the engine can take *transport*: a plain, open TCP connection with nothing queued."""
    return idle_tcp(transport) and getattr(transport, "_shouldShutdown", None) is not None


def _detach(transport) -> socket.socket:
    """A socket of our own for *transport*'s connection; the transport is closed without ending it."""
    sock = socket.socket(fileno=os.dup(transport.fileno()))
    sock.setblocking(False)
    transport._shouldShutdown = False
    transport.loseConnection()
    return sock


class _Pair:
    """A client and a target socket relayed to each other (engine thread only)."""

    __slots__ = ("splice", "socks", "peer", "pending", "eof", "shut", "moved", "masks", "done")

    def __init__(self, splice, client: socket.socket, target: socket.socket, to_target: bytes, to_client: bytes):
        self.splice = splice
        c, t = client.fileno(), target.fileno()
        self.socks = {c: client, t: target}
        self.peer = {c: t, t: c}
        #: bytes waiting to be written *to* each fd
        self.pending = {c: to_client, t: to_target}
        #: fds that sent end of stream
        self.eof: set[int] = set()
        #: fds whose write side we shut down
        self.shut: set[int] = set()
        #: bytes read *from* each fd (and written to its peer)
        self.moved = {c: 0, t: 0}
        self.masks = {c: 0, t: 0}
        self.done = False

    @property
    def client_fd(self) -> int:
        return next(iter(self.socks))


class RelayEngine:
    """One thread with an epoll loop relaying every adopted pair (see the module docstring).

    Methods are called on the reactor thread; the thread starts with the
    first pair.  :meth:`stop` ends it (pairs still open are reset), and is
    what a node calls when it stops.
    """

    def __init__(self, reactor):
        self.reactor = reactor
        self._commands: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread: threading.Thread | None = None
        #: guards starting a thread against a failed one ending (see _thread_failed)
        self._lock = threading.Lock()
        self._stopped = False
        #: pairs open, by splice (reactor-thread view, for close/abort/counts)
        self.pairs = 0

    # -- the reactor side --------------------------------------------------------------
    def adopt(self, splice, client_transport, target_transport, to_target: bytes = b"", to_client: bytes = b"") -> bool:
        """Relay *client_transport* <-> *target_transport* for *splice*; False if they cannot be.

        ``to_target`` / ``to_client`` are bytes to write first (the replayed
        opening).  On success both transports are closed by Twisted (their
        protocols see ``connectionLost``; the splice ignores it) and the
        connection continues in the engine.
        """
        if self._stopped or not (relayable(client_transport) and relayable(target_transport)):
            return False
        client = _detach(client_transport)
        target = _detach(target_transport)
        self.pairs += 1
        self._send(("add", _Pair(splice, client, target, bytes(to_target), bytes(to_client))))
        return True

    def close(self, splice, abort: bool = False) -> None:
        """End *splice*'s pair: cleanly (FIN both ways), or with a reset."""
        self._send(("abort" if abort else "close", splice))

    def stop(self) -> None:
        """Reset every pair and end the thread (waits for it)."""
        if self._stopped:
            return
        self._stopped = True
        thread = self._thread
        if thread is not None:
            self._send(("stop", None))
            thread.join(10)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _send(self, command) -> None:
        if self._stopped and command[0] != "stop":
            return  # the thread is gone and has reset every pair already
        self._commands.put(command)
        with self._lock:
            if self._thread is None and command[0] == "add":
                self._start_thread()
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass  # the pipe is full: the thread has wake-ups pending anyway

    def _start_thread(self) -> None:  # with self._lock held
        self._thread = threading.Thread(target=self._run, name="junction-relay", daemon=True)
        self._thread.start()

    def _thread_failed(self) -> None:
        """The failed thread is done with its pairs: a pair adopted meanwhile gets a new thread.

        A command queued while this thread was failing would otherwise wait
        for a thread that is gone (adopt saw one still running); under the
        lock, either it is in the queue now and a thread starts for it, or
        it comes later and adopt starts one.
        """
        with self._lock:
            self._thread = None
            if not self._stopped and not self._commands.empty():
                self._start_thread()

    def _finished(self, splice, from_client: int, from_target: int, reason: str | None) -> None:
        self.pairs -= 1
        splice._relay_finished(from_client, from_target, reason)

    # -- the engine thread -------------------------------------------------------------
    def _run(self) -> None:
        ep = select.epoll()
        ep.register(self._wake_r, _IN)
        by_fd: dict[int, _Pair] = {}
        by_splice: dict[object, _Pair] = {}
        try:
            while True:
                for fd, events in ep.poll():
                    if fd == self._wake_r:
                        if self._commands_due(ep, by_fd, by_splice):
                            return
                        continue
                    pair = by_fd.get(fd)
                    if pair is None or pair.done:
                        continue
                    if events == _IN and (self._relay_one(pair, fd) or pair.done):
                        if pair.done:
                            self._forget(ep, pair, by_fd, by_splice)
                        continue  # the common case: one read, all of it written, nothing changed
                    trouble = events & (select.EPOLLERR | select.EPOLLHUP)
                    if events & _OUT or (trouble and pair.pending[fd]):
                        self._flush(pair, fd)
                    if not pair.done and events & (_IN | select.EPOLLERR | select.EPOLLHUP):
                        if self._readable(pair, fd):
                            self._relay_one(pair, fd)
                        elif trouble:
                            self._park(ep, pair, fd)
                    if pair.done:
                        self._forget(ep, pair, by_fd, by_splice)
                    else:
                        self._update(ep, pair)
        except Exception:  # noqa: BLE001 - a bug here must not leave connections hanging
            log.exception("relay: the relay thread failed; resetting its connections")
            for pair in list(by_splice.values()):
                self._end(pair, "relay failure", reset=True)
                self._forget(ep, pair, by_fd, by_splice)
            self._thread_failed()
        finally:
            ep.close()

    def _commands_due(self, ep, by_fd, by_splice) -> bool:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                kind, item = self._commands.get_nowait()
            except queue.Empty:
                return False
            if kind == "add":
                pair = item
                by_splice[pair.splice] = pair
                for fd in pair.socks:
                    by_fd[fd] = pair
                    ep.register(fd, 0)
                for fd, data in list(pair.pending.items()):
                    if data:
                        self._flush(pair, fd)
                if pair.done:
                    self._forget(ep, pair, by_fd, by_splice)
                else:
                    self._update(ep, pair)
            elif kind in ("close", "abort"):
                pair = by_splice.get(item)
                if pair is not None and not pair.done:
                    self._end(pair, None if kind == "close" else "aborted", reset=kind == "abort")
                    self._forget(ep, pair, by_fd, by_splice)
            elif kind == "stop":
                for pair in list(by_splice.values()):
                    self._end(pair, "the gateway stopped", reset=True)
                    self._forget(ep, pair, by_fd, by_splice)
                return True

    @staticmethod
    def _readable(pair: _Pair, fd: int) -> bool:
        """Whether *fd* may be read now: not ended, and what it sent before is written."""
        return fd not in pair.eof and not pair.pending[pair.peer[fd]]

    def _park(self, ep, pair: _Pair, fd: int) -> None:
        """*fd* hung up or failed while it may not be read (backpressure).

        An error ends the pair now.  A hang-up without one (the peer closed,
        what it sent last still unread) is reported by epoll whatever the
        mask, so the fd leaves the epoll set until it may be read again
        (:meth:`_update` puts it back), instead of waking the loop for nothing.
        """
        error = pair.socks[fd].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            self._end(pair, _reason(OSError(error, os.strerror(error))), reset=True)
            return
        if pair.masks[fd] != -1:
            ep.unregister(fd)
            pair.masks[fd] = -1

    def _relay_one(self, pair: _Pair, fd: int) -> bool:
        """The hot path: read *fd* once and write it all to its peer; False if anything else happened.

        Anything else -- nothing to read, end of stream, an error, a peer that
        did not take everything -- is recorded (pending bytes, end of stream,
        the pair ended) and the general path (:meth:`_flush`, :meth:`_update`,
        :meth:`_forget`) takes over.  A side is read only while what it sent
        before has been written (:meth:`_readable`): one read per direction at
        most waits in memory.
        """
        peer = pair.peer[fd]
        if fd in pair.eof or pair.pending[peer]:
            return False
        try:
            data = pair.socks[fd].recv(RELAY_READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError as exc:
            self._end(pair, _reason(exc), reset=True)
            return False
        if not data:
            pair.eof.add(fd)
            self._shut_if_flushed(pair, peer)
            return False
        pair.moved[fd] += len(data)
        sent = self._write(pair, peer, data)
        if sent is None:
            return False
        if sent == len(data):
            return True
        pair.pending[peer] = memoryview(data)[sent:]
        return False

    def _write(self, pair: _Pair, fd: int, data) -> int | None:
        """What of *data* the kernel took for *fd* (0 when full); None if the pair ended on an error."""
        try:
            return pair.socks[fd].send(data)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as exc:
            self._end(pair, _reason(exc), reset=True)
            return None

    def _flush(self, pair: _Pair, fd: int) -> None:
        data = pair.pending[fd]
        if data:
            sent = self._write(pair, fd, data)
            if sent is None:
                return
            pair.pending[fd] = data[sent:]
        if not pair.pending[fd]:
            self._shut_if_flushed(pair, fd)

    def _shut_if_flushed(self, pair: _Pair, fd: int) -> None:
        """Once *fd*'s peer ended and everything is written to *fd*, shut *fd*'s write side."""
        if pair.peer[fd] in pair.eof and not pair.pending[fd] and fd not in pair.shut:
            pair.shut.add(fd)
            try:
                pair.socks[fd].shutdown(socket.SHUT_WR)
            except OSError:
                pass
        if len(pair.shut) == 2:
            self._end(pair, None, reset=False)

    def _update(self, ep, pair: _Pair) -> None:
        for fd in pair.socks:
            mask = 0
            if fd not in pair.eof and not pair.pending[pair.peer[fd]]:
                mask |= _IN
            if pair.pending[fd]:
                mask |= _OUT
            if pair.masks[fd] == -1:  # parked after a hang-up (see _park)
                if mask:
                    ep.register(fd, mask)
                    pair.masks[fd] = mask
            elif mask != pair.masks[fd]:
                ep.modify(fd, mask)
                pair.masks[fd] = mask

    def _end(self, pair: _Pair, reason: str | None, reset: bool) -> None:
        if pair.done:
            return
        pair.done = True
        for sock in pair.socks.values():
            if reset:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
                except OSError:
                    pass
        c = pair.client_fd
        t = pair.peer[c]
        self.reactor.callFromThread(self._finished, pair.splice, pair.moved[c], pair.moved[t], reason)

    def _forget(self, ep, pair: _Pair, by_fd, by_splice) -> None:
        for fd, sock in pair.socks.items():
            by_fd.pop(fd, None)
            try:
                ep.unregister(fd)
            except (OSError, ValueError):
                pass
            sock.close()
        by_splice.pop(pair.splice, None)


def _reason(exc: OSError) -> str:
    if exc.errno in (errno.ECONNRESET, errno.EPIPE):
        return "connection reset"
    return os.strerror(exc.errno) if exc.errno else str(exc)
