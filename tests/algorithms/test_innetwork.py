"""In-network all-reduce (``nvls``, ``collnet``): the checker proves the schedules, whose
reducing switches are endpoints after the ranks, and the DES equals the closed form."""

from __future__ import annotations

import pytest

import commsim
from commsim.algorithms import build_schedule, candidates
from commsim.algorithms.base import Call
from commsim.api import make_call
from commsim.checker import check
from commsim.collectives import Collective
from commsim.errors import ScheduleError

PORT = {"latency": "1us", "bandwidth": "100GB/s", "reduction_bandwidth": "80GB/s"}
NIC = {"latency": "4us", "bandwidth": "20GB/s", "reduction_bandwidth": "18GB/s"}


def switch(p: int) -> commsim.Network:
    return commsim.load_topology({"kind": "switch", "ranks": p, "link": PORT})


def hosts(nodes: int, gpus: int, gamma: float = 0.0) -> commsim.Network:
    return commsim.load_topology({
        "kind": "hierarchical", "nodes": nodes, "gpus_per_node": gpus, "gamma": f"{gamma!r}s",
        "intra": PORT, "inter": NIC,
    })


NETWORKS = [
    ("switch2", lambda: switch(2)),
    ("switch5", lambda: switch(5)),
    ("switch8", lambda: switch(8)),
    ("1x4", lambda: hosts(1, 4)),
    ("2x4", lambda: hosts(2, 4)),
    ("3x4-gamma", lambda: hosts(3, 4, 1e-12)),
    ("4x1", lambda: hosts(4, 1)),
    ("5x3", lambda: hosts(5, 3)),
    ("2x8", lambda: hosts(2, 8)),
]
SIZES = (0, 1, 7, 999, (1 << 20) + 3, 3 * (1 << 24) + 5)


@pytest.mark.parametrize(("label", "make"), NETWORKS, ids=[n for n, _ in NETWORKS])
def test_schedules_pass_the_checker_and_des_equals_closed_form(label, make) -> None:
    """Every size (uneven, below the rank count), chunk count and layout: the schedule is
    a correct all-reduce, and DES and closed form agree to 1e-9."""
    net = make()
    ran = 0
    for n in SIZES:
        call = make_call("all_reduce", net, n)
        for name in ("nvls", "collnet"):
            if name not in candidates(call):
                continue
            for chunks in (None, 1, 3, 17):
                sized = make_call("all_reduce", net, n, chunks=chunks)
                schedule = build_schedule(sized, name)
                if n <= 1000:
                    check(schedule)
                des = commsim.simulate("all_reduce", net, n, algorithm=name, chunks=chunks)
                closed = commsim.simulate("all_reduce", net, n, algorithm=name, chunks=chunks,
                                          engine="analytic")
                assert des.time_s == pytest.approx(closed.time_s, rel=1e-9, abs=1e-15)
                ran += 1
    assert ran > 0


def test_where_each_runs() -> None:
    """nvls needs every rank behind a reducing node switch with 2+ ranks per host; collnet a
    reducing fabric; neither runs another collective."""
    assert "nvls" in candidates(make_call("all_reduce", switch(8), 64))
    assert "collnet" not in candidates(make_call("all_reduce", switch(8), 64))
    both = make_call("all_reduce", hosts(2, 4), 64)
    assert {"nvls", "collnet"} <= set(candidates(both))
    assert "nvls" not in candidates(make_call("all_reduce", hosts(4, 1), 64))
    plain = commsim.hierarchical(2, 4, intra=("1us", "1GB/s"), inter=("1us", "1GB/s"))
    call = make_call("all_reduce", plain, 64)
    for name in ("nvls", "collnet"):
        with pytest.raises(ScheduleError, match="reducing"):
            build_schedule(call, name)
    with pytest.raises(ScheduleError, match="cannot run all_gather"):
        build_schedule(make_call("all_gather", switch(4), 64), "nvls")


def test_single_host_nvls_is_the_pipelined_switch_form() -> None:
    """On one switch, c equal pieces take (c + 1)(alpha/2 + n/(c B)): up and back once."""
    n, c = 64 * 2**20, 64
    time_s = commsim.simulate("all_reduce", switch(8), n, algorithm="nvls", chunks=c).time_s
    assert time_s == pytest.approx((c + 1) * (0.5e-6 + n / c / 80e9), rel=1e-12)


def test_checker_catches_a_missing_contribution() -> None:
    """A switch multicast before every rank's upload arrived is refused."""
    from commsim.schedule import OpKind, ScheduleBuilder

    b = ScheduleBuilder()
    up0 = b.add(0, 2, 0, 8, OpKind.REDUCE)
    b.add(1, 2, 0, 8, OpKind.REDUCE)
    b.add(2, 0, 0, 8, OpKind.COPY, [up0])
    b.add(2, 1, 0, 8, OpKind.COPY, [up0])
    with pytest.raises(ScheduleError):
        check(b.build(Collective.ALL_REDUCE, "hand", 2, 8, endpoints=1))


def test_transfers_and_trace_name_the_switch(tmp_path) -> None:
    """The transfers CSV addresses the switch as endpoint `ranks`; the trace has its track."""
    import json

    from commsim.export import write_trace, write_transfers_csv

    net = switch(4)
    result = commsim.simulate("all_reduce", net, 4096, algorithm="nvls")
    frame = result.transfers()
    assert set(frame.dst[frame.op == "reduce"]) == {4}
    assert frame.end_s.max() == result.time_s
    write_transfers_csv(result, tmp_path / "t.csv")
    trace = json.loads(write_trace(result, tmp_path / "t.json", net).read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert "switch 4 (switch)" in names


def test_call_validates_switch_endpoints() -> None:
    with pytest.raises(commsim.SpecError, match="host_switches"):
        Call(collective=Collective.ALL_REDUCE, ranks=2, nbytes=8, host_switches=(1, 2))
