"""The "Cluster" part of ``junction status``: the ``cluster`` key of ``/api/status`` as text.

:func:`format_cluster` turns the dict that ``Node.status()`` puts under
``"cluster"`` (the cluster manager's status plus the node's broadcast and
discovery groups) into the lines :func:`~junction.cli.status_table.format_status`
appends after its own tables.  Like the rest of the status table it tolerates
missing keys (a node with discovery or broadcast groups but no cluster
connection reports only ``node_id`` and the two group lists).

Every table is fitted into :data:`WIDTH` columns: when the natural width is
too wide, the longest text cells of the columns that may shrink are cut with
an ellipsis, never below a few characters.  Tables with no rows are left out.
"""

from __future__ import annotations

from junction.cli.tables import cell, format_duration, format_table, truncate

__all__ = ["WIDTH", "format_cluster", "node_names", "short_id"]

#: The width the cluster lines and tables are fitted into (indent included).
WIDTH = 100
#: Characters of a node id shown when the node's name is not known.
SHORT_ID = 8
#: Table indent (the same as the other sections of ``junction status``).
INDENT = "  "


def short_id(node_id) -> str:
    """The first :data:`SHORT_ID` characters of a node id (``-`` for none)."""
    return str(node_id)[:SHORT_ID] if node_id else "-"


def node_names(cluster: dict) -> dict:
    """node id -> name, from everything in *cluster* that names a node.

    Bridges (the peer's WELCOME), incoming links (its HELLO) and discovery
    entries (its announcement), and this node itself.
    """
    names: dict = {}
    for group in _list(cluster.get("discovery_groups")):
        for entry in _list(group.get("entries")):
            if entry.get("node_id") and entry.get("name"):
                names[entry["node_id"]] = entry["name"]
    for link in _list(cluster.get("incoming_links")):
        if link.get("node_id") and link.get("name"):
            names[link["node_id"]] = link["name"]
    for connection in _list(cluster.get("connections")):
        for bridge in _list(connection.get("bridges")):
            if bridge.get("node_id") and bridge.get("name"):
                names[bridge["node_id"]] = bridge["name"]
    if cluster.get("node_id") and cluster.get("name"):
        names[cluster["node_id"]] = cluster["name"]
    return names


def _list(value) -> list:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _endpoint(host, port) -> str:
    host = "-" if host in (None, "") else str(host)
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{cell(port)}"


def _age(ms) -> str:
    """``age_ms`` as ``0.8s``, ``42s`` or ``01:02:03``."""
    if not isinstance(ms, (int, float)) or isinstance(ms, bool):
        return "-"
    seconds = max(ms, 0) / 1000
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{int(seconds)}s"
    return format_duration(seconds)


def _fit(
    headers: list[str],
    rows: list[list],
    numeric: set[int],
    shrink: dict[int, int],
    width: int = WIDTH,
) -> list[str]:
    """:func:`format_table` lines (indented), the *shrink* columns cut until the table fits *width*.

    *shrink* maps a column to the narrowest it may be cut to; the widest such
    column loses a character at a time.  The last column has no padding, so it
    only counts with the length of its longest cell.
    """
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    total = len(INDENT) + sum(widths) + 2 * (len(widths) - 1)
    while total > width:
        candidates = [i for i, least in shrink.items() if widths[i] > max(least, len(headers[i]))]
        if not candidates:
            break
        widest = max(candidates, key=lambda i: widths[i])
        widths[widest] -= 1
        total -= 1
    for row in cells:
        for i in shrink:
            row[i] = truncate(row[i], widths[i])
    return [INDENT + line for line in format_table(headers, cells, numeric)]


def _line(text: str) -> str:
    """An indented summary line, cut to :data:`WIDTH`."""
    return truncate(INDENT + text, WIDTH)


def _wrapped(lead: str, items: list[str]) -> list[str]:
    """*lead* and the comma-separated *items*, indented and wrapped at :data:`WIDTH` (as the journal figures are)."""
    lines = []
    current = INDENT + lead
    for i, item in enumerate(items):
        text = item + ("," if i < len(items) - 1 else "")
        if len(current) + 1 + len(text) > WIDTH and current.strip() != lead:
            lines.append(current)
            current = INDENT * 2 + text
        else:
            current += " " + text
    lines.append(current)
    return [truncate(line, WIDTH) for line in lines]


def _summary(cluster: dict) -> list[str]:
    connections = _list(cluster.get("connections"))
    lines = ["", "Cluster"]
    if not connections and "messages_forwarded" not in cluster:
        lines.append(_line("no cluster connection (discovery and broadcast groups only)"))
        return lines
    bridges = [b for c in connections for b in _list(c.get("bridges"))]
    opened = sum(1 for b in bridges if b.get("state") == "open")
    bindings = _list(cluster.get("remote_bindings"))
    cut_off = sum(1 for b in bindings if b.get("connected") is False)
    links = [
        f"{opened}/{len(bridges)} bridges open",
        _plural(len(_list(cluster.get("incoming_links"))), "incoming link"),
        _plural(len(bindings), "remote binding")
        + (f" ({cut_off} disconnected)" if cut_off else ""),
    ]
    lines.append(_line(", ".join(links)))
    lines.append(
        _line(
            "messages forwarded {}, received {}, redistributed {}, duplicates dropped {}".format(
                *(
                    cell(cluster.get(k))
                    for k in (
                        "messages_forwarded",
                        "messages_received",
                        "messages_redistributed",
                        "duplicates_dropped",
                    )
                )
            )
        )
    )
    master = cluster.get("master")
    if isinstance(master, dict):
        if master.get("is_master"):
            what = f"this node is the master broker ({cell(master.get('record_entries'))} recorded entities)"
        else:
            state = "reachable" if master.get("available") else "UNREACHABLE, changes refused"
            what = f"master broker {master.get('master_broker')}: {state}"
        pending = master.get("pending_changes")
        if pending:
            what += f", {cell(pending)} waiting to be recorded"
        lines.append(_line(what))
    moving = _list(cluster.get("redistributing"))
    if moving:
        lines += _wrapped(
            "redistributing", [f"{r.get('queue')} ({cell(r.get('moved'))} moved)" for r in moving]
        )
    for connection in connections:
        how = []
        address = connection.get("address")
        how.append(f"address {address}" if address else "all addresses")
        if connection.get("message_load_balancing"):
            how.append(str(connection["message_load_balancing"]))
        if connection.get("max_hops") is not None:
            how.append(f"max-hops {cell(connection['max_hops'])}")
        if connection.get("discovery_group"):
            how.append(f"discovery group {connection['discovery_group']}")
        static = connection.get("static_connectors")
        if isinstance(static, list) and static:
            # one item per connector, so a long list wraps between names
            how += [f"static connectors {static[0]}"] + [str(name) for name in static[1:]]
        lines += _wrapped(f"connection {connection.get('name') or '-'}:", how)
    return lines


def _bridges(cluster: dict, names: dict) -> list[str]:
    """One table per cluster connection that has bridges (its name in the title, not in a column)."""
    lines = []
    for connection in _list(cluster.get("connections")):
        rows = []
        for bridge in _list(connection.get("bridges")):
            node_id = bridge.get("node_id")
            peer = bridge.get("name") or names.get(node_id) or short_id(node_id)
            sent, acked = bridge.get("messages_sent"), bridge.get("messages_acknowledged")
            rows.append(
                [
                    peer,
                    bridge.get("target"),
                    bridge.get("state"),
                    bridge.get("found_by"),
                    f"{cell(sent)}/{cell(acked)}",
                    bridge.get("waiting"),
                    bridge.get("problem") or "",
                ]
            )
        if not rows:
            continue
        headers = ["PEER", "TARGET", "STATE", "FOUND BY", "SENT/ACKED", "WAITING", "PROBLEM"]
        shrink = {0: 12, 1: 21, 6: 24}
        if not any(row[6] for row in rows):
            headers.pop()
            rows = [row[:-1] for row in rows]
            del shrink[6]
        lines += ["", f"Cluster bridges of {truncate(connection.get('name') or '-')} ({len(rows)})"]
        lines += _fit(headers, rows, {4, 5}, shrink)
    return lines


def _incoming(cluster: dict) -> list[str]:
    rows = [
        [link.get("name"), link.get("node_id"), link.get("remote")]
        for link in _list(cluster.get("incoming_links"))
    ]
    if not rows:
        return []
    return ["", f"Incoming cluster links ({len(rows)})"] + _fit(
        ["PEER", "NODE ID", "REMOTE"], rows, set(), {0: 12, 1: SHORT_ID + 1, 2: 21}
    )


def _remote_bindings(cluster: dict, names: dict) -> list[str]:
    rows = []
    filtered = False
    for binding in _list(cluster.get("remote_bindings")):
        origin, via = binding.get("node_id"), binding.get("via")
        node = names.get(origin) or short_id(origin)
        if via and via != origin:
            node += f" via {names.get(via) or short_id(via)}"
        filtered = filtered or bool(binding.get("filter"))
        rows.append(
            [
                binding.get("address"),
                binding.get("queue"),
                node,
                binding.get("routing_type"),
                binding.get("consumers"),
                binding.get("hops"),
                binding.get("connected"),
                binding.get("filter") or "",
            ]
        )
    if not rows:
        return []
    headers = ["ADDRESS", "QUEUE", "NODE", "TYPE", "CONSUMERS", "HOPS", "CONNECTED", "FILTER"]
    shrink = {0: 12, 1: 16, 2: 12, 7: 12}
    if not filtered:
        headers.pop()
        rows = [row[:-1] for row in rows]
        del shrink[7]
    return ["", f"Remote bindings ({len(rows)})"] + _fit(headers, rows, {4, 5}, shrink)


def _group_state(group: dict) -> str:
    where = _endpoint(group.get("group"), group.get("port"))
    return where if group.get("running", True) else where + " (not running)"


def _discovery_groups(cluster: dict) -> list[str]:
    groups = _list(cluster.get("discovery_groups"))
    if not groups:
        return []
    lines = ["", f"Discovery groups ({len(groups)})"]
    for group in groups:
        entries = _list(group.get("entries"))
        counters = [_plural(len(entries), "node"), f"received {cell(group.get('received'))}"]
        for key in ("malformed", "dropped"):
            if _count(group.get(key)):
                counters.append(f"{key} {group[key]}")
        lines.append(
            _line(f"{group.get('name') or '-'}  {_group_state(group)}  " + ", ".join(counters))
        )
        duplicate = group.get("duplicate_node")
        if isinstance(duplicate, dict):
            lines.append(
                _line(
                    f"  THIS NODE'S ID announced from {duplicate.get('source') or '?'}: "
                    "a copied data directory"
                )
            )
        rows = []
        for entry in entries:
            connectors = ", ".join(
                _endpoint(c.get("host"), c.get("port")) for c in _list(entry.get("connectors"))
            )
            rows.append(
                [
                    entry.get("name") or short_id(entry.get("node_id")),
                    connectors or "-",
                    _age(entry.get("age_ms")),
                ]
            )
        if rows:
            lines += [
                INDENT + line
                for line in _fit(
                    ["NODE", "CONNECTORS", "AGE"], rows, {2}, {0: 12, 1: 21}, WIDTH - 2
                )
            ]
    return lines


def _broadcast_groups(cluster: dict) -> list[str]:
    rows = []
    for group in _list(cluster.get("broadcast_groups")):
        connectors = ", ".join(
            _endpoint(c.get("host"), c.get("port")) for c in _list(group.get("connectors"))
        )
        rows.append(
            [
                group.get("name"),
                _group_state(group),
                connectors or "-",
                group.get("sent"),
                group.get("send_errors"),
            ]
        )
    if not rows:
        return []
    return ["", f"Broadcast groups ({len(rows)})"] + _fit(
        ["NAME", "GROUP", "ANNOUNCES", "SENT", "ERRORS"], rows, {3, 4}, {0: 12, 1: 21, 2: 21}
    )


def format_cluster(cluster: dict) -> list[str]:
    """The lines of the "Cluster" section for the ``cluster`` dict of ``/api/status``.

    A summary (bridges open, incoming links, remote bindings, the message
    counters, queues being redistributed, each cluster connection's settings),
    then the tables that have rows: the bridges of each cluster connection,
    incoming cluster links, remote bindings, discovery groups with the nodes
    they know, and broadcast groups.  Each starts with a blank line, as the
    other sections do.
    """
    if not isinstance(cluster, dict):
        return []
    names = node_names(cluster)
    return (
        _summary(cluster)
        + _bridges(cluster, names)
        + _incoming(cluster)
        + _remote_bindings(cluster, names)
        + _discovery_groups(cluster)
        + _broadcast_groups(cluster)
    )
