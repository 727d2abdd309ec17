"""The ``junction`` command line: run a node, show its status, manage users.

``junction up`` runs the appliance: a gateway and the broker cores behind it
(every broker.xml in ``etc/appliance``), each a child process, restarted when
it dies, with a live status table; Ctrl-C stops them all gracefully.
``junction run --config etc/broker.xml`` runs one node in the foreground and
stops gracefully on SIGTERM or Ctrl-C (in-flight journal syncs finish).
``junction status`` prints a running node's state as a table.
``junction route ROUTER KEY`` asks a running node's connection router where a key goes.
``junction user add|passwd|rm|list`` edits the users and roles files; running nodes
take the changes at their next login.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from junction.cli.defaults import DEFAULT_APPLIANCE_DIR, DEFAULT_CONFIG


class JsonFormatter(logging.Formatter):
    """One JSON object per log line (for log shippers)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _setup_logging(json_logs: bool, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if json_logs:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))


def _load(path: str, port_offset: int = 0):
    from junction.config.loader import ConfigErrors, load_config
    from junction.config.ports import offset_ports

    try:
        return offset_ports(load_config(path), port_offset)
    except ConfigErrors as exc:
        print(f"junction: {path} is not valid:\n{exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except FileNotFoundError:
        print(f"junction: no config file at {path}", file=sys.stderr)
        raise SystemExit(2) from None


def _user_store(config):
    """The users and roles files the config names (none needed with security off)."""
    from junction.config.loader import ConfigErrors, load_user_store

    if not config.security_enabled and not os.path.exists(config.users_file):
        return None
    try:
        return load_user_store(config)
    except ConfigErrors as exc:
        print(f"junction: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _certificate_users(config):
    """The certificate login files the config names, or None; exits 2 on a problem in them."""
    from junction.config.loader import ConfigErrors, load_certificate_users

    try:
        return load_certificate_users(config)
    except ConfigErrors as exc:
        print(f"junction: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _supervised(supervisor_pid: int) -> None:
    """A child of ``junction up``: Ctrl-C goes to the supervisor, which stops us in order.

    The node leaves the terminal's process group (the supervisor sends the
    SIGTERM itself, gateways before cores) and asks Linux to send it SIGTERM
    if the supervisor dies, so no node outlives its appliance.
    """
    import signal

    os.setpgrp()
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the supervisor's own stop still applies
        pass
    if os.getppid() != supervisor_pid:  # the supervisor died before prctl took effect
        raise SystemExit(1)


def cmd_run(args) -> int:
    if args.supervised is not None:
        _supervised(args.supervised)
    _setup_logging(args.log_json, args.log_level)
    log = logging.getLogger("junction")
    config = _load(args.config, args.port_offset)
    if args.port_offset:
        log.info("every port of %s moved by --port-offset %d", args.config, args.port_offset)
    from twisted.internet import reactor
    from twisted.internet.error import CannotListenError

    from junction.node import DataDirectoryLocked, Node

    node = Node(
        config, reactor=reactor, user_store=_user_store(config), certificate_users=_certificate_users(config)
    )
    try:
        node.start()
    except DataDirectoryLocked as exc:
        log.error("%s", exc)
        return 3
    except (OSError, CannotListenError) as exc:  # a port in use is a CannotListenError, not an OSError
        log.error("could not start: %s", exc)
        return 3
    reactor.addSystemEventTrigger("before", "shutdown", node.stop)
    _reload_on_sighup(reactor, node)
    from junction.collector import tune, watch

    tune()  # the started node's objects frozen, fewer collections: see junction/collector.py
    watch()
    reactor.run()
    return 1 if node.stop_failure is not None else 0  # a failed journal is no clean stop


def _reload_on_sighup(reactor, node) -> None:
    """SIGHUP reads the TLS certificates again (new connections get them)."""
    import signal

    signal.signal(signal.SIGHUP, lambda signum, frame: reactor.callFromThread(node.reload_tls))


def cmd_up(args) -> int:
    from junction.appliance.folder import (
        ApplianceErrors,
        ApplianceRunning,
        child_specs,
        load_appliance,
        lock_appliance,
    )
    from junction.cli.board import StatusBoard

    folder = args.etc
    try:
        nodes = load_appliance(folder, port_offset=args.port_offset)
    except ApplianceErrors as exc:
        print(f"junction: the appliance in {folder} is not valid:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    try:
        lock_appliance(folder)  # held until this process ends
    except ApplianceRunning as exc:
        print(f"junction: {exc}", file=sys.stderr)
        return 3
    _setup_logging(False, args.log_level)
    from twisted.internet import reactor

    from junction.appliance.supervisor import Supervisor

    live = args.status if args.status is not None else sys.stdout.isatty()

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    specs = child_specs(nodes, folder, log_level=args.log_level, port_offset=args.port_offset)
    supervisor = Supervisor(specs, reactor=reactor)
    board = StatusBoard(nodes, supervisor, reactor=reactor, write=write, live=live)
    supervisor.on_event = board.event
    supervisor.on_output = board.output
    names = ", ".join(f"{n.name} ({n.role})" for n in nodes)
    moved = f" (every port moved by --port-offset {args.port_offset})" if args.port_offset else ""
    write(f"junction up: {folder}: starting {names}{moved}\n")

    def shutdown():
        write("junction up: stopping (gateways first, then broker cores)\n")
        d = supervisor.stop()
        d.addBoth(lambda _: board.stop())
        d.addBoth(lambda _: write("junction up: stopped\n"))
        return d

    reactor.callWhenRunning(supervisor.start)
    reactor.callWhenRunning(board.start)
    reactor.addSystemEventTrigger("before", "shutdown", shutdown)
    reactor.run()
    return 0


#: exit status of ``junction status`` / ``junction route`` when the URL answers for something else
EXIT_NOT_THE_NODE = 3


#: the gateway's management API in the shipped appliance (before any --port-offset)
DEFAULT_MANAGEMENT_PORT = 8161


def _node_arguments(parser) -> None:
    """``--url``, ``--node``, ``--etc`` and ``--port-offset`` of the commands that talk to a node."""
    parser.add_argument("--url", default=None,
                        help="the node's management API (default: --node's in the appliance, "
                        f"else http://127.0.0.1:{DEFAULT_MANAGEMENT_PORT} moved by --port-offset)")
    parser.add_argument("--node", metavar="NAME", help="the node meant (its name or node id): without "
                        "--url, found by name in the appliance (--etc); exit 3 if the URL answers "
                        "for another node or another program")
    parser.add_argument("--etc", default=DEFAULT_APPLIANCE_DIR,
                        help="the appliance folder --node is looked up in (default: %(default)s)")
    parser.add_argument("--port-offset", type=int, default=0, metavar="N",
                        help="the offset the appliance was started with (junction up --port-offset N)")


def _node_url(args) -> tuple[str | None, str | None]:
    """``(management URL, None)`` for ``--url``/``--node``/``--port-offset``, or ``(None, problem)``.

    ``--url`` wins.  Else ``--node NAME`` is looked up among the node configs
    of the appliance folder (``--etc``), with their ports moved by
    ``--port-offset`` as ``junction up`` moved them; a node id (not a name)
    or a folder without that node falls back to the gateway's default URL,
    where the node check then says who answered.  Without ``--node``: the
    gateway's management API, ``127.0.0.1:8161`` moved by the offset.
    """
    if args.url:
        return args.url, None
    default = f"http://127.0.0.1:{DEFAULT_MANAGEMENT_PORT + args.port_offset}"
    if not args.node or not os.path.isdir(args.etc):
        return default, None
    from junction.appliance.folder import ApplianceErrors, load_appliance

    try:
        nodes = load_appliance(args.etc, port_offset=args.port_offset)
    except ApplianceErrors:
        return default, None  # the node check says who answers there
    for node in nodes:
        if node.name == args.node:
            if node.management_url is None:
                return None, (f"node {node.name} ({node.config_path}) has no management API "
                              "(<junction><management>)")
            return node.management_url, None
    return default, None


def _reach_node(args):
    """``(status, None)`` of the node at ``--url`` when it is the one meant (``--node``), else ``(None, exit code)``.

    Another program on the port (not a Junction node's management API) or
    another node than ``--node`` names is said plainly, with the process that
    listens on the port when this host can tell.
    """
    from junction.cli import status_table

    url, problem = _node_url(args)
    if url is None:
        print(f"junction: {problem}", file=sys.stderr)
        return None, 1
    url = args.url = url.rstrip("/")
    try:
        status = status_table.fetch_status(url)
    except status_table.NotAJunctionNode as exc:
        print(f"junction: {exc}{_port_holder(exc.port, url)}", file=sys.stderr)
        return None, EXIT_NOT_THE_NODE
    except OSError as exc:
        print(f"junction: {exc}", file=sys.stderr)
        return None, 1
    problem = status_table.check_node(status, args.node, url)
    if problem is not None:
        print(f"junction: {problem}", file=sys.stderr)
        return None, EXIT_NOT_THE_NODE
    return status, None


def _port_holder(port: int | None, url: str) -> str:
    """``; port 8161 here is held by pid 4242 (java)`` for a URL on this host, when /proc tells."""
    import urllib.parse

    from junction.cli.portowner import describe_listener
    from junction.cli.status_table import _is_loopback, status_url

    host = urllib.parse.urlsplit(status_url(url)).hostname
    if port is None or not _is_loopback(host):
        return ""
    holder = describe_listener(port)
    return f"; port {port} here is held by {holder}" if holder else ""


def cmd_status(args) -> int:
    from junction.cli.status_table import format_status

    status, failed = _reach_node(args)
    if status is None:
        return failed
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
    else:
        print(format_status(status))
    return 0


def cmd_route(args) -> int:
    from junction.cli import status_table

    node, failed = _reach_node(args)  # the node asked is the one meant (its router, not another's)
    if node is None:
        return failed
    url = status_table.route_url(args.url, args.router, args.key)
    try:
        code, payload = status_table.fetch_route(url)
    except OSError as exc:
        print(f"junction: {exc}", file=sys.stderr)
        return 1
    if code == 200:
        if args.json:
            print(json.dumps(payload, indent=2, sort_keys=True))
        else:
            print(f"router:    {args.router} on node {node.get('name')} ({node.get('node_id')})")
            print(status_table.format_route(payload))
        return 0
    if code == 503 and payload.get("status"):
        print(f"junction: refused ({payload['status']}): {payload.get('error', '')}", file=sys.stderr)
        return 2
    print(f"junction: HTTP {code}: {payload.get('error', payload)}", file=sys.stderr)
    return 1


def cmd_user(args) -> int:
    from junction.cli.user import run

    return run(args)


def cmd_version(args) -> int:
    from junction import __version__

    print(f"junction {__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="junction", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one node in the foreground")
    run.add_argument("--config", default=DEFAULT_CONFIG, help="broker.xml to run (default: %(default)s)")
    run.add_argument("--log-json", action="store_true", help="log one JSON object per line")
    run.add_argument("--log-level", default="info", help="debug, info, warning or error")
    run.add_argument("--port-offset", type=int, default=0, metavar="N",
                     help="move every port of the node by N (acceptors, connectors, management)")
    # --supervised PID: a child of `junction up` (the supervisor's pid)
    run.add_argument("--supervised", type=int, default=None, help=argparse.SUPPRESS)
    run.set_defaults(func=cmd_run)

    up = sub.add_parser("up", help="run the appliance: a gateway and its broker cores")
    up.add_argument("--etc", default=DEFAULT_APPLIANCE_DIR,
                    help="folder whose *.xml are the nodes' broker.xml (default: %(default)s)")
    up.add_argument("--log-level", default="info", help="the nodes' log level")
    up.add_argument("--port-offset", type=int, default=0, metavar="N",
                    help="move every port of every node by N, e.g. 1000: gateway 62616, 6672, 62613, 9161")
    shown = up.add_mutually_exclusive_group()
    shown.add_argument("--status", dest="status", action="store_true", default=None,
                       help="show the live status table (the default on a terminal)")
    shown.add_argument("--no-status", dest="status", action="store_false",
                       help="print events and the nodes' log lines instead")
    up.set_defaults(func=cmd_up)

    status = sub.add_parser("status", help="show a running node's status")
    status.add_argument("--json", action="store_true", help="print the raw JSON")
    _node_arguments(status)
    status.set_defaults(func=cmd_status)

    route = sub.add_parser("route", help="ask a running node's connection router where a key goes")
    route.add_argument("router", help="the connection router's name")
    route.add_argument("key", help="the routing key (client id, user name, SNI host, ...)")
    route.add_argument("--json", action="store_true", help="print the raw getTargetAsJSON object")
    _node_arguments(route)
    route.set_defaults(func=cmd_route)

    user = sub.add_parser(
        "user",
        help="manage users and roles (Artemis properties files); running nodes take changes at once",
        description="Which files: --config's, else --etc's, else those of etc/appliance (junction up's "
        "default), else those of etc/broker.xml (junction run's default).",
    )
    user.add_argument("--config", default=None, help="broker.xml naming the users and roles files")
    user.add_argument("--etc", default=None, help="an appliance folder: the users file its nodes share")
    # --config and --etc may also follow the subcommand (junction user add bob --config ...).
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--config", default=argparse.SUPPRESS, help="broker.xml naming the users and roles files")
    where.add_argument("--etc", default=argparse.SUPPRESS, help="an appliance folder: the users file its nodes share")
    user_sub = user.add_subparsers(dest="user_command", required=True)
    add = user_sub.add_parser("add", help="add a user, or replace its password and roles", parents=[where])
    add.add_argument("name")
    add.add_argument("--password", help="the password (prompted for when omitted)")
    add.add_argument("--role", help="comma-separated roles")
    passwd = user_sub.add_parser("passwd", help="change a user's password (its roles stay)", parents=[where])
    passwd.add_argument("name")
    passwd.add_argument("--password", help="the new password (prompted for when omitted)")
    rm = user_sub.add_parser("rm", help="remove a user", parents=[where])
    rm.add_argument("name")
    user_sub.add_parser("list", help="list users and their roles", parents=[where])
    user.set_defaults(func=cmd_user)

    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=cmd_version)

    from junction.pipeline.cli import add_parser as add_analyze_parser  # no pyspark imported here
    add_analyze_parser(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # inside the try: a closed pipe fails here, not at exit
    except BrokenPipeError:
        # whoever read the output went away (``junction status | head``): no traceback, as
        # with other command-line tools; what is still buffered goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
