"""The ``shared`` kind: one host whose ranks share one medium, read strictly, built and timed."""

from __future__ import annotations

import re

import pytest

from commsim.algorithms import Call
from commsim.collectives import Collective
from commsim.engine.analytic import predict
from commsim.engine.des import simulate_des
from commsim.errors import SpecError
from commsim.schedule import OpKind, ScheduleBuilder
from commsim.topology import SharedSpec, load_topology, shared, spec_from_dict
from commsim.topology.dump import dump_yaml

FULL = {
    "kind": "shared",
    "ranks": 4,
    "link": {"latency": "100us", "bandwidth": "2GB/s"},
    "medium": {"bandwidth": "3GB/s"},
    "latency_per_rank": "50us",
    "cores": 2,
    "device": "core",
    "gamma": "0.5ns",
    "algorithms": {"all_reduce": "gloo"},
}


def _transfers(*pairs: tuple[int, int, int]) -> object:
    builder = ScheduleBuilder()
    for src, dst, nbytes in pairs:
        builder.add(src, dst, 0, nbytes, OpKind.COPY)
    return builder.build(Collective.BROADCAST, "hand", 4, max(n for *_, n in pairs))


def test_every_key_is_read_and_defaults_are_the_port() -> None:
    """All optional keys load; without them the medium is the port's bandwidth, no latency
    grows with the ranks, one core, devices are ``cpu``."""
    spec = spec_from_dict(FULL)
    assert isinstance(spec, SharedSpec)
    assert spec.medium_Bps == 3e9 and spec.latency_per_rank_s == pytest.approx(5e-5)
    assert spec.cores == 2 and spec.device == "core"
    link = {"latency": 0, "bandwidth": "1GB/s"}
    bare = spec_from_dict({"kind": "shared", "ranks": 2, "link": link})
    assert isinstance(bare, SharedSpec)
    assert (bare.medium_Bps, bare.latency_per_rank_s, bare.cores, bare.device) == (
        1e9,
        0.0,
        1,
        "cpu",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"medium": {"bandwith": "1GB/s"}}, "medium.bandwith: unknown key"),
        ({"medium": {}}, "medium.bandwidth: missing required key"),
        ({"medium": {"bandwidth": "0GB/s"}}, "medium.bandwidth: must be > 0"),
        ({"medium": "fast"}, "medium: must be a mapping"),
        ({"cores": 0}, "cores: must be a positive integer (got 0)"),
        ({"latency_per_rank": "-1us"}, "latency_per_rank"),
        ({"ranks": 1025}, "ranks: a shared topology has at most 1024 ranks (got 1025)"),
        ({"links": []}, "links: unknown key for kind 'shared'"),
    ],
)
def test_strict_validation(change: dict[str, object], message: str) -> None:
    """Every bad field is a one-line SpecError naming its path."""
    with pytest.raises(SpecError, match=re.escape(message)):
        spec_from_dict(FULL | change)


def test_dump_round_trips() -> None:
    """dump_yaml writes the kind back and it loads to an equal spec."""
    import yaml

    spec = spec_from_dict(FULL)
    assert spec_from_dict(yaml.safe_load(dump_yaml(spec))) == spec


def test_paths_latency_grows_beyond_the_cores() -> None:
    """A transfer costs latency + max(q - cores, 0) x latency_per_rank and the narrower of port
    and medium; a local copy crosses the medium without latency."""
    net = load_topology(FULL)
    for q, latency in ((2, 1e-4), (3, 1.5e-4), (4, 2e-4)):
        assert net.with_ranks(q).path_cost(0, q - 1) == (pytest.approx(latency), 2e9)
    assert net.with_ranks(1).path_cost(0, 0) == (0.0, 2e9)  # a local copy
    links = net.links
    local = net.route(2, 2)
    assert [links[i].label for i in local] == ["core2->medium", "medium@4"]
    assert sum(links[i].latency_s for i in local) == 0.0
    assert net.meta["kind"] == "shared" and net.host_of(3) == 0


def test_concurrent_transfers_share_the_medium() -> None:
    """Two transfers between different pairs share the medium: each alone takes n / port, two
    at once take 2n / medium, whichever ranks they join."""
    net = shared(4, latency=0, bandwidth="2GB/s", medium="2GB/s")
    n = 2_000_000
    alone = simulate_des(_transfers((0, 1, n)), net).time_s
    both = simulate_des(_transfers((0, 1, n), (2, 3, n)), net).time_s
    assert alone == pytest.approx(1e-3) and both == pytest.approx(2e-3)
    wide = shared(4, latency=0, bandwidth="2GB/s", medium="4GB/s")
    assert simulate_des(_transfers((0, 1, n), (2, 3, n)), wide).time_s == pytest.approx(1e-3)
    # a local copy competes for the medium like a transfer
    assert simulate_des(_transfers((0, 1, n), (2, 2, n)), net).time_s == pytest.approx(2e-3)


def test_other_kinds_copy_locally_for_free() -> None:
    """On network kinds a device's route to itself is empty: a local copy takes no time."""
    link = {"latency": "1s", "bandwidth": "1B/s"}
    ring = load_topology({"kind": "ring", "ranks": 4, "link": link})
    assert simulate_des(_transfers((1, 1, 10**6)), ring).time_s == 0.0


def test_analytic_engine_sees_the_uncontended_path() -> None:
    """The closed forms use a path's latency and narrowest bandwidth (no sharing): a ring
    broadcast in one piece is (p - 1) (latency + n / port)."""
    net = shared(4, latency="10us", bandwidth="1GB/s", medium="8GB/s")
    call = Call(collective=Collective.BROADCAST, ranks=4, nbytes=10**6, chunks=1)
    assert predict(call, net, "ring") == pytest.approx(3 * (1e-5 + 1e-3))
