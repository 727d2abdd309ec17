"""The cluster's grouping handlers (:mod:`junction.brokercore.cluster.grouping`), against
the rules of Artemis's ``LocalGroupingHandler`` and ``RemoteGroupingHandler``
(``shared/reference/grouping.md`` sections 3-6)."""

from __future__ import annotations

import pytest

from junction.brokercore.cluster import grouping as g
from junction.brokercore.cluster.grouping import (
    Forget,
    LocalGroupingHandler,
    Persist,
    Proposal,
    RemoteGroupingHandler,
    Response,
    SendProposal,
    SendResponse,
    SendUnproposal,
    TooManyPending,
    Unproposed,
)

NODE1, NODE2 = "aaaa-1", "bbbb-2"
Q1, Q2 = g.cluster_name("queue0", NODE1), g.cluster_name("queue0", NODE2)
ID1 = g.full_group_id("id1", "queue0")


def test_names_are_formed_as_artemis_forms_them():
    assert ID1 == "id1.queue0" and Q1 == "queue0aaaa-1"
    assert g.split_full_group_id("id1.queue0", "queue0") == "id1"
    assert g.split_full_group_id("id1.queue0", "queue1") is None
    assert g.split_full_group_id("a.b.queue0", "queue0") == "a.b"


# -- LOCAL -----------------------------------------------------------------------------------------


def test_the_first_proposal_wins_and_is_persisted_before_it_is_answered():
    local = LocalGroupingHandler()
    response, effects = local.propose(Proposal(ID1, Q1), now=10)
    assert response == Response(ID1, Q1) and response.chosen == Q1
    assert effects == [Persist(ID1, Q1)]
    # a second node proposes its own queue: told the existing binding, nothing persisted
    response, effects = local.propose(Proposal(ID1, Q2), now=20)
    assert response == Response(ID1, Q2, Q1) and response.chosen == Q1 and effects == []


def test_a_proposal_without_a_cluster_name_only_looks_up():
    local = LocalGroupingHandler()
    assert local.propose(Proposal(ID1, None), now=0) == (None, [])
    local.propose(Proposal(ID1, Q1), now=0)
    assert local.propose(Proposal(ID1, None), now=5) == (Response(ID1, Q1), [])
    assert local.groups == {ID1: Q1}


def test_a_proposal_from_another_node_is_answered_over_the_links():
    local = LocalGroupingHandler()
    response, effects = local.receive(Proposal(ID1, Q2), now=0)
    assert effects == [Persist(ID1, Q2), SendResponse(response)]
    _, effects = local.receive(Proposal(ID1, Q1), now=1)
    assert effects == [SendResponse(Response(ID1, Q1, Q2))]


def test_the_reaper_forgets_what_was_not_used_within_the_group_timeout():
    local = LocalGroupingHandler(group_timeout=500)
    local.propose(Proposal(ID1, Q1), now=0)
    other = g.full_group_id("id2", "queue0")
    local.propose(Proposal(other, Q2), now=0)
    local.get_proposal(other, now=400)  # used: touched
    assert local.reap(now=450) == []
    effects = local.reap(now=501)
    (forget,) = [e for e in effects if isinstance(e, Forget)]
    assert [b.group_id for b in forget.bindings] == [ID1]
    assert Unproposed(ID1, Q1) in effects and SendUnproposal(ID1, Q1) in effects
    assert local.groups == {other: Q2}
    # a lookup does not touch when told not to
    local.get_proposal(other, now=800, touch=False)
    assert [b.group_id for e in local.reap(now=901) if isinstance(e, Forget) for b in e.bindings] == [other]


def test_no_reaper_without_a_group_timeout():
    local = LocalGroupingHandler(group_timeout=-1)
    local.propose(Proposal(ID1, Q1), now=0)
    assert local.reap(now=10**12) == [] and local.groups == {ID1: Q1}


def test_a_removed_queue_takes_its_groups_with_it():
    local = LocalGroupingHandler()
    id2 = g.full_group_id("id2", "queue0")
    local.propose(Proposal(ID1, Q1), now=0)
    local.propose(Proposal(id2, Q1), now=0)
    local.propose(Proposal(g.full_group_id("id3", "queue0"), Q2), now=0)
    effects = local.binding_removed(Q1)
    assert {e.group_id for e in effects if isinstance(e, SendUnproposal)} == {ID1, id2}
    assert list(local.groups.values()) == [Q2]
    # the group is decided afresh
    assert local.propose(Proposal(ID1, Q2), now=1) == (Response(ID1, Q2), [Persist(ID1, Q2)])
    assert local.binding_removed("nothing-here") == []


def test_remove_forgets_one_decision_only_if_it_names_that_binding():
    local = LocalGroupingHandler()
    local.propose(Proposal(ID1, Q1), now=0)
    assert local.remove(ID1, Q2) == [] and local.groups == {ID1: Q1}
    effects = local.remove(ID1, Q1)
    assert isinstance(effects[0], Forget) and effects[1:] == [Unproposed(ID1, Q1), SendUnproposal(ID1, Q1)]
    assert local.groups == {}


def test_reloaded_decisions_wait_for_their_bindings_and_keep_their_record_ids():
    local = LocalGroupingHandler()
    local.load([(ID1, Q1, 7), (g.full_group_id("id2", "queue0"), Q2, 8)], now=0)
    assert local.awaiting == {Q1, Q2}
    local.binding_added(Q1)
    assert local.awaiting == {Q2}
    # the reloaded decision holds
    assert local.propose(Proposal(ID1, Q2), now=1)[0].chosen == Q1
    (forget,) = [e for e in local.binding_removed(Q1) if isinstance(e, Forget)]
    assert forget.bindings[0].record_id == 7


def test_the_record_id_of_a_new_decision_is_kept_for_its_deletion():
    local = LocalGroupingHandler()
    local.propose(Proposal(ID1, Q1), now=0)
    local.persisted(ID1, 42)
    assert local.remove(ID1, Q1)[0].bindings[0].record_id == 42


# -- REMOTE ----------------------------------------------------------------------------------------


def test_a_miss_sends_one_proposal_and_waits_for_the_answer():
    remote = RemoteGroupingHandler(timeout=5000)
    assert remote.propose(Proposal(ID1, Q2), now=0) == (None, [SendProposal(Proposal(ID1, Q2))])
    # a second message of the group meanwhile: nothing sent again
    assert remote.propose(Proposal(ID1, Q2), now=1) == (None, [])
    assert remote.pending == 1
    assert remote.proposed(Response(ID1, Q2, Q1), now=2) is True
    assert remote.pending == 0
    response, effects = remote.propose(Proposal(ID1, Q2), now=3)
    assert response.chosen == Q1 and effects == []


def test_an_answer_to_another_nodes_proposal_is_cached_too():
    remote = RemoteGroupingHandler()
    assert remote.proposed(Response(ID1, Q1), now=0) is False
    assert remote.get_proposal(ID1, now=1) == (Response(ID1, Q1), [])


def test_a_proposal_without_an_answer_expires_after_the_timeout():
    remote = RemoteGroupingHandler(timeout=1000)
    remote.propose(Proposal(ID1, Q2), now=0)
    assert remote.expire(now=999) == []
    assert remote.expire(now=1000) == [Proposal(ID1, Q2)]
    assert remote.pending == 0
    # asked again later: a new proposal goes out
    assert remote.propose(Proposal(ID1, Q2), now=1001)[1] == [SendProposal(Proposal(ID1, Q2))]


def test_known_groups_keep_routing_while_the_local_handler_is_unreachable():
    remote = RemoteGroupingHandler(timeout=1000)
    remote.proposed(Response(ID1, Q1), now=0)
    other = g.full_group_id("id2", "queue0")
    # nothing answers any more: the known group routes, the new one waits then expires
    assert remote.propose(Proposal(ID1, Q2), now=10)[0].chosen == Q1
    assert remote.propose(Proposal(other, Q2), now=10) == (None, [SendProposal(Proposal(other, Q2))])
    assert remote.expire(now=1010) == [Proposal(other, Q2)]
    assert remote.propose(Proposal(ID1, Q2), now=1020)[0].chosen == Q1


def test_a_cached_answer_is_refreshed_once_per_group_timeout_while_used():
    remote = RemoteGroupingHandler(group_timeout=100)
    remote.proposed(Response(ID1, Q2, Q1), now=0)
    # used within the timeout: no refresh, and use alone does not move the clock
    for now in (10, 50, 100):
        assert remote.propose(Proposal(ID1, Q2), now=now)[1] == []
    refresh = [SendProposal(Proposal(ID1, Q2))]  # the response's own cluster name, as Artemis
    assert remote.propose(Proposal(ID1, Q2), now=101)[1] == refresh
    assert remote.get_proposal(ID1, now=150)[1] == []
    assert remote.get_proposal(ID1, now=300, touch=False)[1] == []
    assert remote.get_proposal(ID1, now=300)[1] == refresh


def test_an_unproposal_forgets_the_cached_answer_and_unpins_the_queue():
    remote = RemoteGroupingHandler()
    remote.proposed(Response(ID1, Q1), now=0)
    assert remote.remove(ID1, Q2) == []  # not the binding it has
    assert remote.remove(ID1, Q1) == [Unproposed(ID1, Q1)]
    assert remote.get_proposal(ID1, now=1) == (None, [])


def test_a_removed_binding_drops_the_answers_that_chose_it():
    remote = RemoteGroupingHandler()
    other = g.full_group_id("id2", "queue0")
    remote.proposed(Response(ID1, Q2, Q1), now=0)  # chose Q1 though Q2 was proposed
    remote.proposed(Response(other, Q2), now=0)
    remote.binding_removed(Q1)
    assert remote.get_proposal(ID1, now=1)[0] is None and remote.get_proposal(other, now=1)[0] is not None


def test_pending_proposals_are_sent_again_after_a_reset():
    remote = RemoteGroupingHandler(timeout=1000)
    other = g.full_group_id("id2", "queue0")
    remote.propose(Proposal(ID1, Q2), now=0)
    remote.propose(Proposal(other, Q2), now=0)
    assert remote.resend_pending(now=900) == [SendProposal(Proposal(ID1, Q2)), SendProposal(Proposal(other, Q2))]
    assert remote.expire(now=1500) == []  # the deadline moved with the resend
    assert len(remote.expire(now=1900)) == 2


def test_pending_proposals_are_bounded(monkeypatch):
    monkeypatch.setattr(g, "MAX_PENDING", 3)
    remote = RemoteGroupingHandler()
    for i in range(3):
        remote.propose(Proposal(g.full_group_id(f"id{i}", "queue0"), Q2), now=0)
    with pytest.raises(TooManyPending):
        remote.propose(Proposal(g.full_group_id("one-more", "queue0"), Q2), now=0)
    # a group already pending still only waits
    assert remote.propose(Proposal(g.full_group_id("id0", "queue0"), Q2), now=0) == (None, [])
