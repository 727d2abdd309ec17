"""What every server a test runs as a child process shares: spawn, stop, kill -9, restart.

:class:`ChildProcess` is the lifecycle of :class:`tests.harness.BrokerProcess` (a Junction
node) and :class:`tests.artemis.ArtemisBroker` (the real Artemis).  A subclass sets
``name``, ``stop_timeout`` and ``die_with_parent``, implements ``start()`` by calling
:meth:`ChildProcess._spawn` and waiting for its own readiness, and ``_close_logs()``.

* **No orphans.**  Every spawned child is registered and stopped by an ``atexit`` hook (and by
  the pytest fixtures' finalizers); on Linux it also gets ``PR_SET_PDEATHSIG`` so it receives
  SIGTERM if the test process dies hard (SIGKILL, OOM killer) and ``atexit`` never runs.  It
  leads its own session (a terminal's Ctrl-C reaches pytest, which stops it), so stopping
  kills whatever it left in its process group too.
* ``PR_SET_PDEATHSIG`` fires when the *thread* that started the child exits, not the process;
  start children from the main thread or a thread that lives as long as the child should
  (``die_with_parent=False`` otherwise).
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

_live: set[ChildProcess] = set()
_live_lock = threading.Lock()


def _stop_all_at_exit() -> None:
    """atexit hook: stop every child still running."""
    with _live_lock:
        children = list(_live)
    for child in children:
        try:
            child.stop(timeout=5.0)
        except Exception as e:  # best effort at interpreter exit
            print(f"harness: could not stop {child.name}: {e}", file=sys.stderr)


atexit.register(_stop_all_at_exit)


def pdeathsig_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when its parent dies."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return None
    try:
        libc = ctypes.CDLL(libc_name, use_errno=True)
    except OSError:
        return None
    PR_SET_PDEATHSIG = 1

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    return preexec


class ChildProcess:
    """A server run by a test as a child process (see the module docstring)."""

    name: str
    stop_timeout: float
    die_with_parent: bool = True
    proc: subprocess.Popen[bytes] | None = None
    #: stop() or kill9() ended the child (else, once it is gone, it died by itself)
    exit_expected: bool = False

    def start(self, timeout: float | None = None) -> Any:
        raise NotImplementedError

    def _close_logs(self) -> None:
        """Close the files the child's output goes to (it is gone)."""

    def _spawn(
        self,
        command: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdout: IO[bytes],
        stderr: IO[bytes] | int,
    ) -> subprocess.Popen[bytes]:
        """Start the child (own session, parent-death signal) and register it."""
        self.exit_expected = False
        self.proc = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            preexec_fn=pdeathsig_preexec() if self.die_with_parent else None,
            start_new_session=True,  # a terminal's Ctrl-C reaches pytest, which stops us
        )
        with _live_lock:
            _live.add(self)
        return self.proc

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def died(self) -> int | None:
        """The exit status if the child exited by itself (not by stop() or kill9()), else None."""
        if self.proc is None or self.exit_expected or self.proc.poll() is None:
            return None
        return self.proc.returncode

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM, wait up to ``timeout`` (default ``stop_timeout``), then SIGKILL.

        Returns the exit status (``None`` if never started); idempotent.
        """
        proc = self.proc
        self.exit_expected = True
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout if timeout is not None else self.stop_timeout)
            except subprocess.TimeoutExpired:
                print(f"harness: {self.name} ignored SIGTERM; killing it", file=sys.stderr)
                self._kill_group()
                proc.wait(10)
            except ProcessLookupError:
                pass
        if proc is not None:
            self._reap_group()
        self._forget()
        return proc.returncode if proc is not None else None

    def kill9(self) -> int | None:
        """SIGKILL the child (and anything in its session): a crash, no shutdown."""
        proc = self.proc
        self.exit_expected = True
        if proc is not None and proc.poll() is None:
            self._kill_group()
            proc.wait(10)
        self._forget()
        return proc.returncode if proc is not None else None

    def restart(self, *, kill: bool = False, timeout: float | None = None) -> Any:
        """Stop (gracefully, or with SIGKILL when ``kill``) and start again."""
        if kill:
            self.kill9()
        else:
            self.stop()
        return self.start(timeout)

    def _kill_group(self) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass

    def _reap_group(self) -> None:
        """SIGKILL anything the child left in its session (it leads the group)."""
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # the usual case: nothing left

    def _forget(self) -> None:
        with _live_lock:
            _live.discard(self)
        self._close_logs()

    def __enter__(self) -> Any:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
