"""A server run by a test whose output is one console log: the Java peers (Artemis, Classic).

:class:`ConsoleChild` adds to :class:`tests.childproc.ChildProcess` what a server that logs
to its console and is ready when its log (and ports) say so needs: the log appended across
restarts with a banner per start, the start with its deadline and failure messages carrying
the log tail, and the tail for a failed test's report.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from tests.childproc import ChildProcess
from tests.harness import port_open, wait_for


class ChildExited(RuntimeError):
    """A server exited while the harness was waiting for it to be ready."""


class ConsoleChild(ChildProcess):
    """A server whose stdout and stderr go to one console log, appended across starts with a
    banner per start, and which is ready when its own test says so (polled with a deadline).

    A subclass sets ``console_path``, ``startup_timeout``, ``kind`` (for messages: "Artemis
    broker"), ``host``, ``ports`` (name -> port) and ``url``, and implements :meth:`_logged_ready`;
    its ``start()`` calls :meth:`_run_console`.  Ready means logged ready and every port open.
    """

    kind = "server"
    #: what :meth:`_run_console` raises when the server exits while starting
    exited_error: type[ChildExited] = ChildExited
    console_path: Path
    startup_timeout: float
    starts: int = 0
    startup_seconds: float | None = None  # of the last start, until ready
    _log_offset: int = 0
    _console: IO[bytes] | None = None

    host: str
    ports: dict[str, int]
    url: str

    def _logged_ready(self, since_start: bytes) -> bool:
        """Whether the server says it is ready, given its console output since this start."""
        raise NotImplementedError

    def _run_console(
        self,
        command: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float | None,
        what: str,
    ) -> None:
        """Start ``command`` with its output appended to the console log and wait until
        ready.  Fails fast with :attr:`exited_error` if it exits while starting;
        on a timeout it is stopped and TimeoutError raised; both carry the log tail."""
        if self.running:
            raise RuntimeError(f"{self.kind} {self.name} is already running (pid {self.pid})")
        self._close_logs()
        self.starts += 1
        self.console_path.parent.mkdir(parents=True, exist_ok=True)
        self._console = open(self.console_path, "ab")  # closed by _close_logs()
        self._console.write(
            f"\n===== harness: start #{self.starts} at {time.strftime('%H:%M:%S')} =====\n".encode()
        )
        self._console.flush()
        self._log_offset = self._console.tell()
        began = time.monotonic()
        self._spawn(command, cwd=cwd, env=env, stdout=self._console, stderr=subprocess.STDOUT)
        try:
            wait_for(
                self._ready,
                timeout if timeout is not None else self.startup_timeout,
                interval=0.05,
                what=f"{self.kind} {self.name} to {what}",
            )
        except TimeoutError as e:
            tail = self.log_tail()
            self.stop()
            raise TimeoutError(f"{e}\n--- {self.name} log tail ---\n{tail}") from None
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began

    def _ready(self) -> bool:
        assert self.proc is not None
        rc = self.proc.poll()
        if rc is not None:
            raise self.exited_error(
                f"{self.kind} {self.name} exited with status {rc} while starting"
                f"\n--- {self.name} log tail ---\n{self.log_tail()}"
            )
        with open(self.console_path, "rb") as f:
            f.seek(self._log_offset)
            if not self._logged_ready(f.read()):
                return False
        return all(port_open(p, self.host) for p in self.ports.values())

    def _close_logs(self) -> None:
        if self._console is not None:
            self._console.close()
            self._console = None

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM (the server's orderly shutdown), wait up to ``timeout``, then SIGKILL;
        idempotent.  The exit status: None if never started."""
        return super().stop(timeout)

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<{type(self).__name__} {self.name} {self.url} {state}>"

    def log_text(self) -> str:
        """The console log, whole (every start's)."""
        p = self.console_path
        return p.read_text(encoding="utf-8", errors="replace") if p.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the console log, for failure messages."""
        return "\n".join(self.log_text().splitlines()[-lines:])

