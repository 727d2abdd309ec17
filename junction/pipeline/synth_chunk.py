"""One chunk of the synthetic log: its messages, every node's lines about them, and the faults planted.

A chunk is :data:`~junction.pipeline.synth.CHUNK_MESSAGES` messages, generated
by one task of :func:`~junction.pipeline.synth.generate`'s process pool from
its own seeded generator, into files of its own.  Consumers connect first
(one connection per queue, through the gateway); then each message picks a
user (Zipf-like), an address of the user's tenant (or, rarely, another's),
a group, and at most one fault (lost, duplicated, unexpected, expired,
dead-lettered; a reorder on grouped addresses), and writes what every node
would log about it: sent and forwarded on its producer's core, delivered
and acknowledged (or expired, dead-lettered, never acknowledged) on each
queue's core, recovered at the restarts in between.
"""

from __future__ import annotations

import math
import random
import time

from junction.events.schema import SCHEMA_VERSION
from junction.pipeline.synth_files import NodeFiles
from junction.pipeline.synth_gateway import GatewayLog
from junction.pipeline.synth_model import (
    ACK_FLOOR_US,
    ACK_SCALE_US,
    DELIVERY_FLOOR_US,
    DELIVERY_SCALE_US,
    EXPIRY_US,
    FLUSH_CHECK_MESSAGES,
    FLUSH_LINES,
    FORWARD_US,
    GROUP_SEQ_FRACTION,
    LARGE_BYTES,
    LARGE_P,
    LATENCY_CAP_US,
    LATENCY_TAIL_ALPHA,
    LOST_DELIVERED_P,
    MAX_DELIVERY_ATTEMPTS,
    MESSAGES_PER_CONNECTION,
    RATE_PERIOD_S,
    RATE_SWING,
    REDELIVERY_P,
    REDISTRIBUTE_P,
    REORDER_DELAY_US,
    SEQ_PER_CHUNK,
    SIZE_BYTES,
    UNEXPECTED_CLEAR_US,
)
from junction.pipeline.synth_restarts import Restarts
from junction.pipeline.synth_world import World, pick

__all__ = ["chunk"]


def chunk(spec: dict) -> dict:
    """Generate chunk ``spec['index']``: its files, and its part of the truth."""
    p = spec["params"]
    world = World(p)
    index = spec["index"]
    rng = random.Random(f"chunk-{p['seed']}-{index}")
    rnd = rng.random
    out_dir = p["out_dir"]
    start_us = spec["start_us"]
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(start_us / 1e6))
    first_seq = index * SEQ_PER_CHUNK + 1
    n_cores = len(world.cores)
    files = [NodeFiles(out_dir, name, stamp, first_seq, p["rotate_lines"]) for name in world.cores]
    gw_files = NodeFiles(out_dir, world.gateway, stamp, first_seq, p["rotate_lines"])
    all_files = files + [gw_files]
    node_part = [f'"node":"{n}","node_id":"{i}"' for n, i in zip(world.cores, world.core_ids, strict=True)]
    core_ids = world.core_ids
    counts = dict.fromkeys(
        (
            "connection.accepted", "connection.routed", "connection.closed", "message.sent",
            "message.forwarded", "message.redistributed", "message.delivered", "message.acknowledged",
            "message.expired", "message.dead_lettered", "node.started", "message.recovered",
        ),
        0,
    )
    truth = {
        "lost": [], "lost_pairs": [], "in_flight": [], "in_flight_pairs": [], "duplicated": [], "unexpected": [],
        "out_of_order": [],
        "acknowledged": 0, "expired": 0, "dead_lettered": 0, "redelivered": 0, "forwarded": 0, "redistributed": 0,
        "connections": 0, "refused": {}, "last_us": 0,
    }

    # -- connections (through the gateway) and the cores' restarts ----------------------------
    gateway = GatewayLog(world, rng, gw_files, counts, truth, index)
    gateway_connection, gateway_close = gateway.connect, gateway.close
    # each core's restarts, in order; chunk 0 writes the node.started lines
    restarts = Restarts(world, p["restarts"], files, node_part, counts, started=index == 0)
    next_restart, held = restarts.next_after, restarts.held

    # consumers: one connection per queue for the chunk
    t_us = start_us
    consumer_conn = []  # per queue index: (core conn id, client_id, consumer id, gconn, opened)
    queues_by_index = {q.index: q for a in world.addresses for q in a.queues}
    for qi in range(world.n_queues):
        q = queues_by_index[qi]
        gconn, cconn, client_id, t_us = gateway_connection(q.consumer, t_us)
        consumer_conn.append((cconn, client_id, f"{cconn}:1", gconn, t_us, [0]))
        t_us += 100 + int(rnd() * 1000)

    producers: dict[int, list] = {}  # user -> [gconn, core conn, client_id, remaining, opened, bytes]

    # -- messages ------------------------------------------------------------------------------
    mean_gap_us = 1e6 / p["rate"]
    loss, dups, unexp = p["loss"], p["duplicates"], p["unexpected"]
    exp_p, dl_p = p["expired"], p["dead_lettered"]
    reorder_p = min(1.0, p["reorders"] / world.grouped_share) if world.grouped_share else 0.0
    cross = p["cross_tenant"]
    f_loss = loss
    f_dup = f_loss + dups
    f_unexp = f_dup + unexp
    f_exp = f_unexp + exp_p
    f_dl = f_exp + dl_p
    n_tenants = len(world.tenant_names)
    user_cum, user_total = world.user_cum, world.user_cum[-1]
    groups_n = p["groups"]
    # groups of this chunk: each belongs to one grouped address
    groups = []
    if world.grouped_addresses and groups_n > 0:
        for g in range(groups_n):
            address = world.grouped_addresses[g % len(world.grouped_addresses)]
            gid = f"{address.name.split('.')[0]}-{index}-{g:03d}"
            groups.append([gid, address, rnd() < GROUP_SEQ_FRACTION, 0])
    groups_of: dict[int, list] = {}
    for g in groups:
        groups_of.setdefault(id(g[1]), []).append(g)
    group_last: dict = {}  # (gid, queue) -> last delivery us
    group_deliveries: dict = {}  # (gid, queue) -> [(first delivery us, rank, message_id)]

    def tail(floor, scale):
        u = rnd()
        value = floor + scale * ((1.0 - u) ** (-1.0 / LATENCY_TAIL_ALPHA) - 1.0)
        return int(min(value, LATENCY_CAP_US))

    seq = spec["first_message"]
    t_us += 1_000
    period_us = RATE_PERIOD_S * 1e6
    routes: dict = {}  # (address, origin core) -> (local queues, remote cores, queues as JSON)
    for _ in range(spec["messages"]):
        # the gaps' mean stays mean_gap_us (so chunks line up); the rate swings around it
        swing = 1.0 - RATE_SWING * math.sin(2.0 * math.pi * (t_us - spec["epoch_us"]) / period_us)
        t_us += int(-math.log(1.0 - rnd()) * mean_gap_us * swing) + 1
        seq += 1
        user = pick(user_cum, rnd() * user_total)
        tenant = world.tenant_of[user]
        if cross and rnd() < cross and n_tenants > 1:
            tenant = (tenant + 1 + int(rnd() * (n_tenants - 1))) % n_tenants
        cum = world.tenant_address_cum[tenant]
        address = world.tenant_addresses[tenant][pick(cum, rnd() * cum[-1])]
        origin = world.user_core[user]
        # the producer's connection
        prod = producers.get(user)
        if prod is None or prod[3] <= 0:
            if prod is not None:
                gateway_close(prod[0], prod[4], t_us - 1, prod[5], 200 + prod[6] * 40)
            gconn, cconn, client_id, opened = gateway_connection(user, t_us - 3_000)
            prod = producers[user] = [
                gconn, cconn, client_id, int(rng.expovariate(1.0 / MESSAGES_PER_CONNECTION)) + 1, opened, 300, 0,
            ]
        prod[3] -= 1
        mid = f"{core_ids[origin]}/{seq}"
        size = SIZE_BYTES[0] + int(rnd() * SIZE_BYTES[1]) + (int(rnd() * LARGE_BYTES) if rnd() < LARGE_P else 0)
        prod[5] += size + 60
        prod[6] += 1
        # the message's group
        gid = None
        rank = None
        if address.grouped and groups:
            choices = groups_of.get(id(address))
            if choices:
                g = choices[int(rnd() * len(choices))]
                g[3] += 1
                gid = g[0]
                rank = g[3] if g[2] else t_us
                gseq_json = str(g[3]) if g[2] else "null"
        # which fault, if any
        r = rnd()
        fault = None
        if r < f_dl:
            if r < f_loss:
                fault = "lost"
            elif r < f_dup:
                fault = "dup"
            elif r < f_unexp:
                fault = "unexpected"
            elif r < f_exp:
                fault = "expired"
            else:
                fault = "dead"
        if fault == "unexpected":  # far enough from a restart of its core that no crash explains it
            coming = next_restart(origin, t_us)
            if coming is not None and coming - t_us < UNEXPECTED_CLEAR_US:
                fault = None
        reorder = gid is not None and fault is None and rnd() < reorder_p
        queues = address.queues
        route = routes.get((address.name, origin))
        if route is None:
            local = [q for q in queues if q.core == origin]
            route = routes[(address.name, origin)] = (
                local,
                sorted({q.core for q in queues if q.core != origin}),
                "[" + ",".join(q.jname for q in local) + "]",
            )
        local, remote_cores, qjson = route
        victims = ()
        fault_queue = None
        if fault == "lost":
            if local:
                k = 1 if len(local) == 1 else 1 + int(rnd() * len(local))
                victims = set(rng.sample(local, k))
            else:
                victims = set(queues)
        elif fault in ("dup", "expired", "dead"):
            fault_queue = queues[int(rnd() * len(queues))]
        elif fault == "unexpected":
            truth["unexpected"].append(mid)
        origin_lines = files[origin].lines
        opart = node_part[origin]
        sent_us = t_us
        if fault != "unexpected":
            if gid is None:
                gpart = '"group_id":null,"group_seq":null'
            else:
                gpart = f'"group_id":"{gid}","group_seq":{gseq_json}'
            origin_lines.append(
                f'{{"v":{SCHEMA_VERSION},"kind":"message.sent","ts":{sent_us / 1000.0!r},{opart},'
                f'"message_id":"{mid}","duplicate_id":null,"address":{address.jname},"queues":{qjson},'
                f'"size":{size},"durable":true,{gpart},"conn":"{prod[1]}","user":{world.user_json[user]},'
                f'"client_id":"{prod[2]}","routing_type":"{address.routing_type}"}}'
            )
            counts["message.sent"] += 1
            for core in remote_cores:
                origin_lines.append(
                    f'{{"v":{SCHEMA_VERSION},"kind":"message.forwarded","ts":{(sent_us + FORWARD_US + int(rnd() * 300)) / 1000.0!r},'
                    f'{opart},"message_id":"{mid}","duplicate_id":null,"address":{address.jname},'
                    f'"to_node":"{core_ids[core]}","size":{size}}}'
                )
                counts["message.forwarded"] += 1
                truth["forwarded"] += 1
        # every queue's fate
        acks_before = counts["message.acknowledged"]
        victim_pairs: list = []
        lost_now = False
        for q in queues:
            core = q.core
            arrive = sent_us + (FORWARD_US if core != origin else 0)
            if (
                core == origin and fault is None and not reorder and address.routing_type == "ANYCAST"
                and n_cores > 1 and rnd() < REDISTRIBUTE_P
            ):
                # the consumer moved: the queue's message goes to another core, delivered there
                to = (core + 1 + int(rnd() * (n_cores - 1))) % n_cores
                origin_lines.append(
                    f'{{"v":{SCHEMA_VERSION},"kind":"message.redistributed","ts":{(arrive + 200) / 1000.0!r},'
                    f'{opart},"message_id":"{mid}","duplicate_id":null,"address":{address.jname},'
                    f'"queue":{q.jname},"to_node":"{core_ids[to]}","size":{size}}}'
                )
                counts["message.redistributed"] += 1
                truth["redistributed"] += 1
                core = to
                arrive += 1_000
            lines = files[core].lines
            npart = node_part[core]
            cconn, client_id, consumer, _g, _o, delivered_count = consumer_conn[q.index]
            cuser = world.user_json[q.consumer]
            if fault == "expired" and q is fault_queue:
                held(core, q, mid, address, arrive, sent_us + EXPIRY_US)
                lines.append(
                    f'{{"v":{SCHEMA_VERSION},"kind":"message.expired","ts":{(sent_us + EXPIRY_US) / 1000.0!r},{npart},'
                    f'"message_id":"{mid}","duplicate_id":null,"address":{address.jname},"queue":{q.jname}}}'
                )
                counts["message.expired"] += 1
                truth["expired"] += 1
                continue
            d_us = arrive + tail(DELIVERY_FLOOR_US, DELIVERY_SCALE_US)
            if gid is not None:
                key = (gid, q.name)
                last = group_last.get(key, 0)
                if d_us <= last:
                    d_us = last + 1 + int(rnd() * 50)
                if reorder:
                    d_us += REORDER_DELAY_US[0] + int(rnd() * (REORDER_DELAY_US[1] - REORDER_DELAY_US[0]))
                else:
                    group_last[key] = d_us
            lost_here = q in victims
            if lost_here:
                # never acknowledged: the next restart of its core loses it, or it is in flight
                gone = next_restart(core, arrive)
                # (on another core than the sender's, never delivered: the audit knows its node
                # from the forward, not its queue, so the pair names the node, "@<node id>")
                delivered_too = core == origin and rnd() < LOST_DELIVERED_P and (gone is None or d_us < gone)
                pair = [mid, q.name if core == origin else "@" + core_ids[core]]
                pairs = truth["in_flight_pairs"] if gone is None else truth["lost_pairs"]
                if pair not in victim_pairs:
                    victim_pairs.append(pair)
                    pairs.append(pair)
                lost_now = lost_now or gone is not None
                if not delivered_too:
                    continue  # never delivered
            if gid is not None and fault != "unexpected":
                group_deliveries.setdefault(key, []).append((d_us, rank, mid))
            deliveries = 1
            if fault == "dead" and q is fault_queue:
                deliveries = MAX_DELIVERY_ATTEMPTS
            elif fault is None and rnd() < REDELIVERY_P:
                deliveries = 2
                truth["redelivered"] += 1
            when = d_us
            for count in range(1, deliveries + 1):
                lines.append(
                    f'{{"v":{SCHEMA_VERSION},"kind":"message.delivered","ts":{when / 1000.0!r},{npart},'
                    f'"message_id":"{mid}","duplicate_id":null,"address":{address.jname},"queue":{q.jname},'
                    f'"consumer":"{consumer}","conn":"{cconn}","delivery_count":{count},"user":{cuser},'
                    f'"client_id":"{client_id}"}}'
                )
                counts["message.delivered"] += 1
                delivered_count[0] += size
                when += 1_000 + tail(ACK_FLOOR_US, ACK_SCALE_US) * 4
            if lost_here:
                continue
            if fault == "dead" and q is fault_queue:
                held(core, q, mid, address, arrive, when, (d_us,))
                lines.append(
                    f'{{"v":{SCHEMA_VERSION},"kind":"message.dead_lettered","ts":{when / 1000.0!r},{npart},'
                    f'"message_id":"{mid}","duplicate_id":null,"address":{address.jname},"queue":{q.jname},'
                    f'"reason":"max delivery attempts ({MAX_DELIVERY_ATTEMPTS}) reached"}}'
                )
                counts["message.dead_lettered"] += 1
                truth["dead_lettered"] += 1
                continue
            acks = 1
            if fault == "dup" and q is fault_queue:
                acks = 2
                truth["duplicated"].append([mid, q.name])
            a_us = when - 1_000 + tail(ACK_FLOOR_US, ACK_SCALE_US) if deliveries == 1 else when
            for n_ack in range(acks):
                if n_ack:  # acknowledged, then delivered again (a failover) and acknowledged again
                    a_us += 2_000 + tail(DELIVERY_FLOOR_US, DELIVERY_SCALE_US)
                    lines.append(
                        f'{{"v":{SCHEMA_VERSION},"kind":"message.delivered","ts":{a_us / 1000.0!r},{npart},'
                        f'"message_id":"{mid}","duplicate_id":null,"address":{address.jname},"queue":{q.jname},'
                        f'"consumer":"{consumer}","conn":"{cconn}","delivery_count":2,"user":{cuser},'
                        f'"client_id":"{client_id}"}}'
                    )
                    counts["message.delivered"] += 1
                    a_us += tail(ACK_FLOOR_US, ACK_SCALE_US)
                lines.append(
                    f'{{"v":{SCHEMA_VERSION},"kind":"message.acknowledged","ts":{a_us / 1000.0!r},{npart},'
                    f'"message_id":"{mid}","duplicate_id":null,"address":{address.jname},"queue":{q.jname},'
                    f'"consumer":"{consumer}","conn":"{cconn}","user":{cuser},"client_id":"{client_id}"}}'
                )
                counts["message.acknowledged"] += 1
                if a_us > truth["last_us"]:
                    truth["last_us"] = a_us
                if not n_ack and fault != "unexpected":
                    held(core, q, mid, address, arrive, a_us, (d_us,))
        if fault != "unexpected" and counts["message.acknowledged"] > acks_before:
            truth["acknowledged"] += 1
        if fault == "lost":
            (truth["lost"] if lost_now else truth["in_flight"]).append(mid)
        if not seq % FLUSH_CHECK_MESSAGES:
            for f in all_files:
                if len(f.lines) >= FLUSH_LINES:
                    f.flush()

    # close the connections still open (producers, then consumers) at the chunk's end
    end_us = t_us + 1_000_000
    for prod in producers.values():
        gateway_close(prod[0], prod[4], end_us, prod[5], 200 + prod[6] * 40)
    for _cconn, _client_id, _consumer, gconn, opened, delivered_bytes in consumer_conn:
        gateway_close(gconn, opened, end_us + 1_000, 400 + delivered_bytes[0] // 50, 300 + delivered_bytes[0])

    # which group deliveries came after a later-sent message of their group (the audit's rule)
    for (gid, qname), rows in group_deliveries.items():
        rows.sort()
        high = None
        for _d, rank, mid in rows:
            if high is not None and rank < high:
                truth["out_of_order"].append([mid, gid, qname])
            if high is None or rank > high:
                high = rank

    names = []
    lines_written = 0
    for f in all_files:
        f.close()
        names.extend(f.names)
        lines_written += f.written
    truth["files"] = names
    truth["counts"] = counts
    truth["events"] = lines_written
    truth["last_us"] = max(truth["last_us"], end_us + 1_000)
    truth["start_us"] = start_us
    return truth

