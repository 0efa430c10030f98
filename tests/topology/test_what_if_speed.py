"""What makes ``run --what-if`` fast never changes an answer: a composed candidate's latency
phase skips the simulations a bound settles (:func:`commsim.engine.exact.takes_at_least`),
and the calls of a what-if's reuse scope (:mod:`commsim.engine.reuse`) equal fresh ones."""

from __future__ import annotations

import pytest

import commsim
from commsim.algorithms.calls import make_call
from commsim.engine import evaluate as evaluate_module
from commsim.engine import reuse
from commsim.engine.exact import takes_at_least
from commsim.engine.reuse import in_scope
from commsim.nccl import NcclModel
from commsim.nccl_composed import ComposedTimer
from commsim.topology import load_topology
from commsim.topology.degrade import apply_what_if

NIC3_FAILED = {"links": {"gpu3->fabric": {"failed": True}, "fabric->gpu3": {"failed": True}}}
NIC3_HALF = {"links": {"gpu3->fabric": {"bandwidth": 0.5}, "fabric->gpu3": {"bandwidth": 0.5}}}
HOST1_NICS = {"links": {"gpu[89]->fabric": {"bandwidth": "25GB/s"},
                        "gpu1[0-5]->fabric": {"bandwidth": "25GB/s"}}}
#: 8 DGX H100 hosts: a double binary tree among the hosts is simulated (it is contended).
PRESET = "dgx-h100x8"


@pytest.fixture(autouse=True)
def _empty_memo():
    reuse.forget()
    yield
    reuse.forget()


@pytest.mark.parametrize("what_if", [None, NIC3_FAILED, NIC3_HALF],
                         ids=["healthy", "failed", "half"])
@pytest.mark.parametrize("name", ["hierarchical_pipelined", "nvls"])
def test_a_composed_estimate_skips_only_what_the_bound_settles(
        monkeypatch: pytest.MonkeyPatch, what_if: dict | None, name: str) -> None:
    """Every protocol at 4 KiB, 1 MiB and 1 GiB: the same time and note as when every phase
    is simulated, and some phase's simulation was skipped."""
    net = load_topology(PRESET)
    if what_if is not None:
        net, _ = apply_what_if(net, what_if)
    model = NcclModel.of(net)
    said: list[bool] = []

    def counted(*args: object) -> bool:
        said.append(takes_at_least(*args))  # type: ignore[arg-type]
        return said[-1]

    for nbytes in (4096, 1 << 20, 1 << 30):
        call = make_call("all_reduce", net, nbytes)
        for protocol in model.protocols_of(name):
            proto = model.protocol(protocol)
            monkeypatch.setattr(evaluate_module, "takes_at_least", counted)
            fast = ComposedTimer(model, "des").evaluate(call.collective, call.ranks, nbytes,
                                                         name, proto)
            monkeypatch.setattr(evaluate_module, "takes_at_least", lambda *args: False)
            every = ComposedTimer(model, "des").evaluate(call.collective, call.ranks, nbytes,
                                                          name, proto)
            assert (fast.time_s, fast.note) == (every.time_s, every.note)
    assert any(said)


@pytest.mark.parametrize("what_if", [NIC3_FAILED, NIC3_HALF, HOST1_NICS],
                         ids=["failed", "half", "host1"])
@pytest.mark.parametrize("size", ["1MiB", "1GiB"])
def test_both_calls_of_a_scope_equal_fresh_ones(what_if: dict, size: str) -> None:
    """The degraded call then the healthy one in one scope, as ``run --what-if`` makes them,
    give the times of each machine timed alone, to the bit."""
    scoped = in_scope(load_topology(PRESET))
    degraded, _ = apply_what_if(scoped, what_if)
    both = [commsim.simulate("all_reduce", n, size).time_s for n in (degraded, scoped)]
    reuse.forget()
    alone, _ = apply_what_if(load_topology(PRESET), what_if)
    assert both == [commsim.simulate("all_reduce", alone, size).time_s,
                    commsim.simulate("all_reduce", load_topology(PRESET), size).time_s]
