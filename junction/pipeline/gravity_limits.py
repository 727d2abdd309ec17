"""The data-gravity planner's limits and defaults, in one place, and the error it raises.

Every module of the planner (:mod:`junction.pipeline.gravity` and its
``gravity_*`` siblings) takes its limits from here, so each is named once.
"""

from __future__ import annotations

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_BALANCE",
    "DEFAULT_BROKERS",
    "DEFAULT_POLICY",
    "DEFAULT_ROUTER_NAME",
    "FORMS",
    "KEY_TYPES",
    "LOAD_EPS",
    "LOUVAIN_GAIN_EPS",
    "LOUVAIN_MAX_LEVELS",
    "LOUVAIN_MAX_SWEEPS",
    "MAX_FILTER_KEYS",
    "MAX_KEYS",
    "MAX_PAIRS",
    "MAX_REFINE_PASSES",
    "MAX_SWAP_VERTICES",
    "MODULO_SHARDS_PER_BROKER",
    "POLICY_SEED",
    "PlanError",
    "REFINE_MIN_GAIN",
    "REPORT_ROWS",
    "REPORT_SNIPPET_CHARS",
]

#: most distinct keys the planner takes to the driver (a clear error beyond: the partition is
#: in-memory Python, and a local-target-filter of more keys is not a sane configuration anyway)
MAX_KEYS = 100_000
#: most distinct (producer key, consumer key) pairs taken to the driver (an error beyond)
MAX_PAIRS = 2_000_000
#: brokers to plan for when neither --brokers nor the events nor --targets say
DEFAULT_BROKERS = 3
#: a broker may carry at most this times the mean load (--balance)
DEFAULT_BALANCE = 1.1
#: the policy that places keys without a connection.routed event (--policy)
DEFAULT_POLICY = "CONSISTENT_HASH"
#: the <connection-router name> of the generated snippets (--router-name)
DEFAULT_ROUTER_NAME = "gravity"
#: shards per broker when --form modulo is given no --modulo
MODULO_SHARDS_PER_BROKER = 8
#: a filter listing more keys than this is flagged in the report (each connection is matched
#: against it; --form modulo keeps filters short whatever the number of keys)
MAX_FILTER_KEYS = 5_000
#: Louvain: most aggregation levels, and most sweeps over the vertices within one level
LOUVAIN_MAX_LEVELS = 20
LOUVAIN_MAX_SWEEPS = 50
#: Louvain: a move must gain more than this fraction of the total degree (float noise never moves)
LOUVAIN_GAIN_EPS = 1e-12
#: refinement: most rounds of moves and swaps over every level (each change lowers the cut)
MAX_REFINE_PASSES = 20
#: refinement stops when a round takes less than this fraction of the cut off it
REFINE_MIN_GAIN = 0.001
#: swaps scan the other broker's vertices: only on graphs (Louvain levels, or the keys
#: themselves) of at most this many vertices
MAX_SWAP_VERTICES = 2_000
#: seed of ROUND_ROBIN/LEAST_CONNECTIONS start positions, so their placements are repeatable
POLICY_SEED = 0
#: rows of each table shown in the HTML report (the Parquet tables have them all)
REPORT_ROWS = 20
#: characters of one snippet shown in the report (the whole snippet is in CONFIG_FILE)
REPORT_SNIPPET_CHARS = 20_000

#: --key -> the <key-type> whose values those are
KEY_TYPES = {"user": "USER_NAME", "client_id": "CLIENT_ID"}
FORMS = ("filter", "modulo")

#: relative tolerance of load comparisons (loads are byte counts; sums of floats drift)
LOAD_EPS = 1e-9

#: the file (under out/) with every broker's <connection-router>
CONFIG_FILE = "gravity-routers.xml"


class PlanError(ValueError):
    """An option the planner cannot use (the job turns it into a PipelineError)."""
