"""The synthetic log's gateway: each client connection accepted, routed (or refused) and closed.

The gateway routes every connection with the router ``shard`` on the key
``USER_NAME`` to the core its user hashes to (:attr:`World.user_core
<junction.pipeline.synth_world.World>`); a few attempts are refused (and
retried at once), a few decisions wait for the pool's quorum, and a CORE
client is redirected rather than forwarded.  One :class:`GatewayLog` per
chunk writes the gateway's lines and numbers the connections, on the
gateway and on each core.
"""

from __future__ import annotations

from junction.events.schema import SCHEMA_VERSION
from junction.pipeline.synth_model import (
    CACHE_HIT_P,
    CONN_IDS_PER_CHUNK,
    CONNECTION_LOST_P,
    PROTOCOLS,
    QUORUM_WAIT_P,
    REFUSAL_P,
    REFUSAL_REASONS,
)
from junction.pipeline.synth_world import weighted

__all__ = ["GatewayLog"]


class GatewayLog:
    """The gateway's connection lines of one chunk (``files``: the gateway's NodeFiles).

    ``rng`` is the chunk's generator: the draws made here are part of the
    chunk's one sequence, so the same seed gives the same files.
    ``counts`` (lines per kind) and ``truth`` (the chunk's part of the truth:
    ``connections``, ``refused``) are the chunk's, updated in place.
    """

    def __init__(self, world, rng, files, counts: dict, truth: dict, index: int):
        self.world = world
        self.rng = rng
        self.files = files
        self.part = f'"node":"{world.gateway}","node_id":"{world.gateway_id}"'
        self.counts = counts
        self.truth = truth
        self.gw_conn = index * CONN_IDS_PER_CHUNK
        self.core_conn = [index * CONN_IDS_PER_CHUNK] * len(world.cores)
        self.routed_before: set = set()

    def connect(self, user: int, t_us: int) -> tuple[str, str, str, int]:
        """Accept and route one connection of ``user`` (retrying refusals): gateway conn, core conn, client id, time."""
        world, rng, counts, truth = self.world, self.rng, self.counts, self.truth
        rnd = rng.random
        gw_files, gw_part = self.files, self.part
        core_ids = world.core_ids
        core = world.user_core[user]
        name = world.users[user]
        tenant = world.tenant_of[user]
        protocol = weighted(rng, PROTOCOLS)
        while True:
            self.gw_conn += 1
            gconn = str(self.gw_conn)
            remote = f"10.{tenant + 1}.{user % 250}.{(user * 7) % 250 + 1}:{rng.randrange(20000, 65000)}"
            sni = f'"{world.tenant_names[tenant]}.msg.example.net"' if protocol == "amqp" else "null"
            gw_files.lines.append(
                f'{{"v":{SCHEMA_VERSION},"kind":"connection.accepted","ts":{t_us / 1000.0!r},{gw_part},'
                f'"conn":"{gconn}","remote":"{remote}","acceptor":"gateway-{protocol}",'
                f'"protocol":"{protocol}","sni_host":{sni},"user":null,"client_id":null}}'
            )
            t_us += 50 + int(rnd() * 200)
            hit = name in self.routed_before and rnd() < CACHE_HIT_P
            refused = rnd() < REFUSAL_P
            if hit:
                decision_us = 3.0 + rnd() * 12.0
            else:
                decision_us = 20.0 + rnd() * 60.0
            if rnd() < QUORUM_WAIT_P:  # waiting for the pool's quorum: the long tail
                decision_us *= 10.0 + rnd() * 200.0
            decision_us = round(decision_us, 1)
            client_id = f"{name}-{self.gw_conn % 1000}"
            if refused:
                reason = weighted(rng, REFUSAL_REASONS)
                truth["refused"][reason] = truth["refused"].get(reason, 0) + 1
                gw_files.lines.append(
                    f'{{"v":{SCHEMA_VERSION},"kind":"connection.routed","ts":{t_us / 1000.0!r},{gw_part},'
                    f'"conn":"{gconn}","router":"shard","key_type":"USER_NAME","key":"{name}",'
                    f'"transformed_key":"{name}","target":null,"target_node_id":null,'
                    f'"decision":"refused","reason":"{reason}","cache_hit":false,'
                    f'"decision_us":{decision_us!r},"user":"{name}","client_id":"{client_id}"}}'
                )
                t_us += 100 + int(rnd() * 500)
                gw_files.lines.append(
                    f'{{"v":{SCHEMA_VERSION},"kind":"connection.closed","ts":{t_us / 1000.0!r},{gw_part},'
                    f'"conn":"{gconn}","bytes_in":{180 + int(rnd() * 200)},"bytes_out":{120 + int(rnd() * 80)},'
                    f'"duration_ms":{(600 + int(rnd() * 1000)) / 1000.0!r},"reason":"refused by router shard"}}'
                )
                counts["connection.accepted"] += 1
                counts["connection.routed"] += 1
                counts["connection.closed"] += 1
                t_us += 1_000 + int(rnd() * 50_000)
                continue
            self.routed_before.add(name)
            decision = "redirect" if protocol == "core" else "forward"
            gw_files.lines.append(
                f'{{"v":{SCHEMA_VERSION},"kind":"connection.routed","ts":{t_us / 1000.0!r},{gw_part},'
                f'"conn":"{gconn}","router":"shard","key_type":"USER_NAME","key":"{name}",'
                f'"transformed_key":"{name}","target":"{world.cores[core]}","target_node_id":"{core_ids[core]}",'
                f'"decision":"{decision}","reason":null,"cache_hit":{"true" if hit else "false"},'
                f'"decision_us":{decision_us!r},"user":"{name}","client_id":"{client_id}"}}'
            )
            counts["connection.accepted"] += 1
            counts["connection.routed"] += 1
            truth["connections"] += 1
            self.core_conn[core] += 1
            return gconn, str(self.core_conn[core]), client_id, t_us

    def close(self, gconn: str, opened_us: int, t_us: int, bytes_in: int, bytes_out: int) -> None:
        """The ``connection.closed`` line of gateway connection ``gconn`` (a few end with an error)."""
        reason = '"Connection lost"' if self.rng.random() < CONNECTION_LOST_P else "null"
        self.files.lines.append(
            f'{{"v":{SCHEMA_VERSION},"kind":"connection.closed","ts":{t_us / 1000.0!r},{self.part},'
            f'"conn":"{gconn}","bytes_in":{bytes_in},"bytes_out":{bytes_out},'
            f'"duration_ms":{(t_us - opened_us) / 1000.0!r},"reason":{reason}}}'
        )
        self.counts["connection.closed"] += 1
