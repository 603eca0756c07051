"""The run memo stays bounded by nodes, not only by runs: big runs cannot pile up gigabytes."""

from __future__ import annotations

from calcgraph.domain.runs.memo import KeptAnswer, RunMemo
from calcgraph.domain.runs.state import NodeState


def _states(count: int) -> dict[str, NodeState]:
    return {f"n{i}": NodeState() for i in range(count)}


def test_states_are_bounded_by_their_nodes() -> None:
    memo = RunMemo(runs=256, nodes=10_000)
    for run in range(5):
        memo.states.put(f"r{run}", (1, _states(3_000)))
    # 15,000 nodes offered, 10,000 kept: the three most recent runs.
    assert [memo.states.get(f"r{run}") is not None for run in range(5)] == [
        False,
        False,
        True,
        True,
        True,
    ]


def test_a_run_bigger_than_the_bound_is_still_remembered_alone() -> None:
    memo = RunMemo(runs=256, nodes=1_000)
    memo.states.put("small", (1, _states(10)))
    memo.states.put("big", (1, _states(5_000)))
    assert memo.states.get("big") is not None
    assert memo.states.get("small") is None


def test_small_runs_are_bounded_by_their_count() -> None:
    memo = RunMemo(runs=3, nodes=100_000)
    for run in range(4):
        memo.states.put(f"r{run}", (0, _states(4)))
    assert memo.states.get("r0") is None
    assert all(memo.states.get(f"r{run}") is not None for run in (1, 2, 3))


def test_remembering_a_run_again_replaces_its_weight() -> None:
    memo = RunMemo(runs=256, nodes=1_000)
    for revision in range(10):  # the same run, revision after revision: one entry
        memo.states.put("r", (revision, _states(600)))
    memo.states.put("other", (0, _states(300)))
    assert memo.states.get("r") is not None
    assert memo.states.get("other") is not None


def test_a_forgotten_run_frees_its_share_of_the_bound() -> None:
    memo = RunMemo(runs=256, nodes=10_000)
    memo.states.put("ended", (1, _states(6_000)))
    memo.forget("ended")
    assert memo.states.get("ended") is None
    memo.states.put("a", (1, _states(5_000)))
    memo.states.put("b", (1, _states(5_000)))
    # Both fit: the ended run's 6,000 nodes no longer count.
    assert memo.states.get("a") is not None
    assert memo.states.get("b") is not None
    memo.forget("never remembered")  # nothing to forget is no error


def test_hundreds_of_small_runs_polled_in_turn_stay_remembered() -> None:
    memo = RunMemo()  # as the services build it
    for _ in range(2):  # 2,000 diamond runs, each ticked in turn, twice
        for run in range(2_000):
            if memo.states.get(f"r{run}") is None:
                memo.states.put(f"r{run}", (1, _states(5)))
    assert all(memo.states.get(f"r{run}") is not None for run in range(2_000))


def test_retry_defaults_are_answered_only_when_every_version_is_remembered() -> None:
    memo = RunMemo()
    assert memo.retry_defaults({"v1"}) is None
    memo.remember_retry_defaults({"v1", "v2"}, {"v1": {"max_attempts": 3}})
    # v2 declares none: remembered as such, not asked again.
    assert memo.retry_defaults({"v1", "v2"}) == {"v1": {"max_attempts": 3}}
    assert memo.retry_defaults({"v2"}) == {}
    assert memo.retry_defaults({"v1", "v3"}) is None  # v3 never read: the caller reads


def test_a_change_here_then_elsewhere_sends_the_next_tick_to_the_lock() -> None:
    memo = RunMemo()
    assert not memo.expects_work("r", ("t0", "e"))
    memo.answers.put("r", KeptAnswer(None, "u", "u", None, "private", None, 0.0))  # changed here
    assert not memo.expects_work("r", ("t1", "e"))  # its own token not noted yet
    memo.note_token("r", ("t1", "e"))
    assert not memo.expects_work("r", ("t1", "e"))  # nothing since its own change
    assert memo.expects_work("r", ("t2", "e"))  # a job's end renewed it
    memo.note_token("r", ("t2", "e"))  # noted once: a second note changes nothing
    assert memo.expects_work("r", ("t2", "e"))
    memo.forget("r")
    assert not memo.expects_work("r", ("t2", "e"))


def test_a_run_created_here_and_not_ticked_since_sends_its_first_tick_to_the_lock() -> None:
    memo = RunMemo()
    memo.states.put("r", (0, _states(3)))  # as its creation remembers it
    assert memo.expects_work("r", None)
    memo.states.put("r", (1, _states(3)))  # ticked
    assert not memo.expects_work("r", None)
