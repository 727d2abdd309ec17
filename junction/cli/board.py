"""What ``junction up`` shows: the appliance's live status board.

:class:`StatusBoard` polls each node's management API and shows a live table
(nodes, ports, readiness as the gateway's pool sees it, connections,
restarts), or, when the output is not a terminal, one line per event and
each child's log lines prefixed with its name.  It is the supervisor's
observer: a child whose status answers is marked running.  A node that could
not bind a port says which, what of it uses the port and who holds it
(:func:`bind_problem`: ``8161 in use (management API), by pid 4242 (java)``).
"""

from __future__ import annotations

import errno
import json
import re
import time
from collections import deque
from collections.abc import Callable

from junction.appliance.folder import ApplianceNode
from junction.appliance.supervisor import Child, ChildState, Supervisor
from junction.cli.tables import format_duration, format_table

__all__ = [
    "STATUS_INTERVAL",
    "STATUS_TIMEOUT",
    "EVENT_LINES",
    "StatusBoard",
    "format_board",
    "bind_problem",
]

#: seconds between two polls of every node's status (and table redraws)
STATUS_INTERVAL = 1.0
#: seconds a status poll may take before the node counts as not answering
STATUS_TIMEOUT = 2.0
#: how many recent events the live table shows under it
EVENT_LINES = 8


# -- the live status -------------------------------------------------------------------
class StatusBoard:
    """Polls each node's ``/api/status`` and shows the appliance's state.

    ``write`` receives whole screens (a terminal: the table redrawn in place)
    or lines (anything else).  Polls go through a Twisted HTTP agent on the
    injected reactor, one request per node in flight at most.
    """

    def __init__(
        self,
        nodes: list[ApplianceNode],
        supervisor: Supervisor,
        *,
        reactor,
        write: Callable[[str], None],
        live: bool,
        agent=None,
        owner: Callable[[int], str | None] | None = None,
    ):
        self.nodes = {n.name: n for n in nodes}
        #: who listens on a port a node could not bind (default: the host's sockets, see
        #: bind_problem)
        self.owner = owner
        self.supervisor = supervisor
        self.reactor = reactor
        self.write = write
        self.live = live
        self.statuses: dict[str, dict | None] = {n.name: None for n in nodes}
        #: node name -> why its last run could not start, when it could not bind a port
        self.problems: dict[str, str] = {}
        self.events: deque[str] = deque(maxlen=EVENT_LINES)
        self._inflight: set[str] = set()
        self._loop = None
        if agent is None:
            from twisted.web.client import Agent, HTTPConnectionPool

            pool = HTTPConnectionPool(reactor, persistent=True)
            pool.maxPersistentPerHost = 1
            pool.retryAutomatically = False
            self._pool = pool
            agent = Agent(reactor, connectTimeout=STATUS_TIMEOUT, pool=pool)
        else:
            self._pool = None
        self.agent = agent

    # supervisor hooks
    def event(self, child: Child, text: str) -> None:
        if text.startswith("exited") and child.name in self.nodes:
            problem = bind_problem(self.nodes[child.name], child.last_error, owner=self.owner)
            if problem is None:
                self.problems.pop(child.name, None)
            else:
                self.problems[child.name] = problem
                text = f"exited ({child.last_exit}): {problem}"
        line = f"{time.strftime('%H:%M:%S')} {child.name}: {text}"
        self.events.append(line)
        if not self.live:
            self.write(line + "\n")

    def output(self, child: Child, line: str) -> None:
        if not self.live and line:
            self.write(f"{child.name} | {line}\n")

    # polling
    def start(self) -> None:
        from twisted.internet.task import LoopingCall

        self._loop = LoopingCall(self.tick)
        self._loop.clock = self.reactor
        self._loop.start(STATUS_INTERVAL, now=True)

    def stop(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        if self._pool is not None:
            return self._pool.closeCachedConnections()
        return None

    def tick(self) -> None:
        for name, node in self.nodes.items():
            child = self.supervisor.child(name)
            if node.management_url is None or not child.alive:
                self.statuses[name] = None
                continue
            if name in self._inflight:
                continue
            self._inflight.add(name)
            self._poll(name, node.management_url + "/api/status")
        if self.live:
            self.write(self.render(clear=True))

    def _poll(self, name: str, url: str) -> None:
        from twisted.web.client import readBody

        d = self.agent.request(b"GET", url.encode("ascii"))
        timeout = self.reactor.callLater(STATUS_TIMEOUT, d.cancel)

        def got(response):
            return readBody(response).addCallback(lambda body: (response.code, body))

        def parsed(result):
            code, body = result
            status = json.loads(body) if code == 200 else None
            child = self.supervisor.child(name)
            # only this node's own answer counts: another program (or another node) may hold
            # the port while this one cannot bind it
            ours = isinstance(status, dict) and status.get("name") == name and status.get("pid") in (None, child.pid)
            self.statuses[name] = status if ours else None
            if ours:
                self.supervisor.mark_running(child)

        def failed(_failure):
            self.statuses[name] = None

        def done(_):
            if timeout.active():
                timeout.cancel()
            self._inflight.discard(name)

        d.addCallback(got).addCallback(parsed).addErrback(failed).addBoth(done)

    # rendering
    def render(self, *, clear: bool = False) -> str:
        text = format_board(list(self.nodes.values()), self.supervisor, self.statuses, self.reactor.seconds(),
                            self.problems)
        if self.events:
            text += "\n\n" + "\n".join(self.events)
        text += "\n\nCtrl-C stops everything.  Logs: data/logs/<node>.log in the appliance folder.\n"
        return ("\x1b[H\x1b[2J" + text) if clear else text


def _pool_view(statuses: dict) -> dict:
    """node id -> (ready, connection count) as the gateways' pools see each target."""
    view: dict = {}
    for status in statuses.values():
        for router in ((status or {}).get("routers") or {}).values():
            for target in router.get("targets", []):
                if target.get("node_id"):
                    view[target["node_id"]] = target
    return view


def format_board(
    nodes: list[ApplianceNode], supervisor: Supervisor, statuses: dict, now: float, problems: dict | None = None
) -> str:
    """The appliance table: one row per node.

    LAST EXIT is how the node's last run ended, or, when it could not bind a
    port, why (``problems``, from :func:`bind_problem`): ``8161 in use (management API)``.
    """
    problems = problems or {}
    pool = _pool_view(statuses)
    rows = []
    for node in nodes:
        child = supervisor.child(node.name)
        status = statuses.get(node.name) or {}
        state = child.state.value
        if child.state is ChildState.BACKOFF and child.restart_at is not None:
            state = f"restarting in {max(0.0, child.restart_at - now):.0f}s"
        ports = []
        for acceptor in status.get("acceptors", []) or []:
            mark = "" if acceptor.get("listening", True) else "!"
            ports.append(f"{acceptor.get('port')}{mark}")
        if not ports:
            ports = [entry.rsplit(":", 1)[-1] for entry in node.listens]
        if node.management_url:
            ports.append("http " + node.management_url.rsplit(":", 1)[-1])
        connections = sum(a.get("connections", 0) + a.get("forwarded", 0) for a in status.get("acceptors", []) or [])
        if node.role == "gateway":
            routers = status.get("routers") or {}
            ready = ", ".join(
                f"{name} {r.get('ready', 0)}/{len(r.get('targets', []))}" for name, r in routers.items()
            ) or "-"
        else:
            target = pool.get(status.get("node_id"))
            ready = "-" if target is None else ("ready" if target.get("ready") else "not ready")
        uptime = "-"
        if child.alive and child.started_at is not None:
            uptime = format_duration(now - child.started_at)
        rows.append(
            [
                node.name,
                node.role,
                state,
                child.pid or "-",
                " ".join(ports),
                connections if status else "-",
                ready,
                child.restarts,
                uptime,
                problems.get(node.name) or child.last_exit or "",
            ]
        )
    headers = ["NODE", "ROLE", "STATE", "PID", "PORTS", "CONNS", "READY", "RESTARTS", "UP", "LAST EXIT"]
    return "\n".join(format_table(headers, rows, numeric={3, 5, 7}))


# -- a node that could not bind ------------------------------------------------------------
#: what ``junction run`` logs when it cannot bind (Twisted's CannotListenError after "could not start: ")
_LISTEN_ERROR = re.compile(
    r"Couldn't listen on (?P<host>\S*):(?P<port>\d+): (?:\[Errno (?P<errno>\d+)\] )?(?P<reason>.*?)\.?$"
)


def _port_user(config, port: int) -> str | None:
    """What of a node's config listens on *port*: ``acceptor stomp`` or ``management API``."""
    names = [f"acceptor {a.name}" for a in config.acceptors if a.port == port]
    if config.management_port == port:
        names.append("management API")
    return ", ".join(names) or None


def bind_problem(node: ApplianceNode, error: str | None, *, owner: Callable[[int], str | None] | None = None) -> str | None:
    """Why *node* could not start, from the error line it logged, when it could not bind a port.

    ``8161 in use (management API), by pid 4242 (java)``; ``80 needs privileges
    (acceptor web)``; None for any other error.  ``owner(port)`` names the
    process listening on the port (default: :func:`~junction.cli.portowner.describe_listener`).
    """
    found = _LISTEN_ERROR.search(error or "")
    if found is None:
        return None
    port = int(found["port"])
    code = int(found["errno"]) if found["errno"] else None
    holder = None
    if code == errno.EADDRINUSE:
        text = f"{port} in use"
        if owner is None:
            from junction.cli.portowner import describe_listener as owner
        holder = owner(port)
    elif code == errno.EACCES:
        text = f"{port} needs privileges"
    elif code == errno.EADDRNOTAVAIL:
        text = f"{found['host']} is not an address of this host (port {port})"
    else:
        text = f"cannot listen on {port}: {found['reason']}"
    what = _port_user(node.config, port)
    if what:
        text += f" ({what})"
    if holder:
        text += f", by {holder}"
    return text
