"""AMQP topic subscriptions are queues named as Artemis names them (its AMQP session callback)."""

from __future__ import annotations

import pytest

from junction.brokercore.amqp_terminus import subscription_queue_name


@pytest.mark.parametrize(
    "client_id,link,shared,global_,volatile,expected",
    [
        ("cid", "sub", False, False, False, "cid.sub"),  # durable subscription
        (None, "sub", False, False, False, "sub"),  # no container id
        ("", "sub", False, False, False, "sub"),
        ("cid", "sub|2", True, False, False, "cid.sub"),  # shared: the |suffix goes
        ("cid", "sub", True, False, True, "cid.sub:shared-volatile"),
        ("cid", "sub|1", True, True, False, "sub:global"),  # global: no container id
        ("cid", "sub|volatile2", True, True, True, "sub:shared-volatile:global"),
        ("cid", "a|b", False, False, False, "cid.a|b"),  # not shared: the name as given
    ],
)
def test_subscription_queue_name(client_id, link, shared, global_, volatile, expected):
    assert subscription_queue_name(client_id, link, shared, global_, volatile) == expected
