"""Views of a network (a protocol's scaled links, a reducing switch's ports) derive their links
lazily (DerivedLinks) and share the structure of the network they view: the same links as an
eager copy, the same routes, and what depends only on routes computed once."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from commsim.devices import DeviceTable, device_columns
from commsim.links import LinkColumns, LinkTable, link_columns, link_values
from commsim.nccl import NcclModel
from commsim.nccl_paths import link_classes
from commsim.nccl_tables import NcclConfig, hop_factor
from commsim.network import DerivedLinks, Link
from commsim.topology import load_topology


def _double(links: LinkColumns, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Twice the latency, and links 3 and 5 at 1 B/s (by index)."""
    return 2 * links.latency_s, np.where(np.isin(at, (3, 5)), 1.0, links.bandwidth_Bps)


def _doubled(i: int, link: Link) -> Link:
    return Link(link.src, link.dst, 2 * link.latency_s,
                1.0 if i in (3, 5) else link.bandwidth_Bps, link.label)


@pytest.mark.parametrize("preset", ["dgx-h100x2", "dgx1-v100"])  # a LinkTable and a tuple
def test_derived_links_equal_the_eager_copy(preset: str) -> None:
    base = load_topology(preset).links
    eager = tuple(_doubled(i, link) for i, link in enumerate(base))
    lazy = DerivedLinks(base, _double)
    assert len(lazy) == len(eager)
    assert lazy[3] == eager[3] and lazy[-1] == eager[-1] and lazy[2:5] == eager[2:5]
    assert lazy == eager and eager == lazy and tuple(lazy) == eager
    assert hash(lazy) == hash(eager) and lazy.ends is base
    many = DerivedLinks(base, _double)  # reading most links makes them all at once
    assert [many[i] for i in range(len(base))] == list(eager)
    assert pickle.loads(pickle.dumps(DerivedLinks(base, _double))) == eager  # as a tuple
    chained = DerivedLinks(DerivedLinks(base, _double), _double)  # a view of a view
    at = np.array([5, 0, 3])
    expected = link_columns([DerivedLinks(lazy, _double)[i] for i in at.tolist()])
    assert chained.ends is base and all(
        (a == b).all() for a, b in zip(link_values(chained, at), expected, strict=True))
    assert chained.values(at).latency_s.tolist() == [4 * base[i].latency_s for i in (5, 0, 3)]


def test_link_tables_read_as_their_links() -> None:
    """The hierarchical kind's links are numpy columns: each reads, compares, hashes and
    pickles as the tuple of its links."""
    net = load_topology("dgx-h100x2")
    table = net.links
    assert isinstance(table, LinkTable)
    links = tuple(table)
    assert links[5] == table[5] == table[5 - len(links)] and table[2:4] == links[2:4]
    assert table == links and hash(table) == hash(links)
    assert pickle.loads(pickle.dumps(table)) == links
    columns = link_columns(links)
    assert all((a == b).all() for a, b in zip(columns, table.columns(), strict=True))
    with pytest.raises(IndexError):
        table[len(links)]


def test_views_pickle() -> None:
    """A network whose protocol views were made (kept with it) still pickles, for sweeps."""
    net = load_topology("dgx-h100x2")
    view = NcclModel.of(net).network_for(net.ranks, "ring", "LL")
    copy = pickle.loads(pickle.dumps(view))
    assert copy.links == view.links and copy.route(0, 9) == view.route(0, 9)
    assert pickle.loads(pickle.dumps(net)).route(0, 9) == net.route(0, 9)


def test_protocol_networks_scale_every_link_and_share_the_routes() -> None:
    net = load_topology("dgx-h100x4")
    model = NcclModel.of(net)
    ll, simple = (model.network_for(net.ranks, "double_binary_tree", p) for p in ("LL", "Simple"))
    assert isinstance(ll.links, DerivedLinks)
    assert ll.ends() is net.links and simple.ends() is net.links
    table, cls = NcclConfig.of(net).tables, link_classes(net)[0]
    for view, protocol in ((ll, "LL"), (simple, "Simple")):  # each link x its hop factor
        assert view.links[0].latency_s == pytest.approx(
            net.links[0].latency_s * hop_factor(table, cls, "tree", protocol, True))
    assert ll.route(0, 9) == simple.route(0, 9) == net.route(0, 9)
    assert ll._routes is simple._routes  # noqa: SLF001 - one route cache per group of ranks
    assert ll.structural("probe", lambda: 1) == 1 and simple.structural("probe", lambda: 2) == 1


def test_reducing_view_shares_structure_but_not_values() -> None:
    net = load_topology("dgx-h100x2+sharp")
    switches = frozenset(d for d in net.reduction_switches)
    view = net.reducing_view(switches)
    assert view.ends() is net.links and view._routes is net._routes  # noqa: SLF001
    ported = [i for i, link in enumerate(net.links) if link.src in switches or link.dst in switches]
    assert ported and all(view.links[i].bandwidth_Bps == net.devices[
        net.links[i].src if net.links[i].src in switches else net.links[i].dst].reduction_Bps
        for i in ported)
    assert view.derived("probe", lambda: 1) == 1 and net.derived("probe", lambda: 2) == 2


def test_other_ranks_get_their_own_structure() -> None:
    net = load_topology("dgx-h100x2")
    fewer = net.with_ranks(8)
    assert fewer._routes is not net._routes  # noqa: SLF001
    assert fewer.structural("probe", lambda: "a") == "a"
    assert net.structural("probe", lambda: "b") == "b"


def test_device_tables_read_as_their_devices() -> None:
    """The hierarchical kind's devices are numpy columns: each reads, compares, hashes and
    pickles as the tuple of its devices, and its columns are what the devices say."""
    net = load_topology("dgx-h100x2+sharp")
    table = net.devices
    assert isinstance(table, DeviceTable)
    devices = tuple(table)
    assert [d.name for d in devices[14:]] == ["gpu14", "gpu15", "nvswitch0", "nvswitch1",
                                              "fabric"]
    assert table[3] == devices[3] == table[3 - len(devices)] and table[15:17] == devices[15:17]
    assert table == devices and hash(table) == hash(devices)
    assert pickle.loads(pickle.dumps(table)) == devices
    plain, columns = device_columns(devices), table.columns()
    assert (plain.kind == columns.kind).all() and (plain.host == columns.host).all()
    assert np.array_equal(plain.reduction_Bps, columns.reduction_Bps, equal_nan=True)
    with pytest.raises(IndexError):
        table[len(devices)]


@pytest.mark.parametrize("preset", ["dgx-h100x4", "dgx1-v100", "tpu-v4-64"])
def test_routes_in_numpy_equal_the_router(preset: str) -> None:
    """Network.route_links (vectorised where the router has a form for it) lists the links
    route() finds pair by pair, endpoints beyond the ranks (switches) included."""
    net = load_topology(preset)
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, net.ranks, 200), rng.integers(0, net.ranks, 200)
    expected = [i for a, b in zip(src.tolist(), dst.tolist(), strict=True)
                for i in net.route(a, b)]
    assert net.route_links(src, dst).tolist() == expected
    apart = src != dst
    assert net.route_links(src[apart], dst[apart]).tolist() == expected


def test_structure_read_from_columns() -> None:
    """Hosts, reducing switches and NCCL's link classes, as the columns give them."""
    net = load_topology("dgx-h100x2+sharp")
    assert net.rank_hosts() == (0,) * 8 + (1,) * 8
    assert net.reducing_switches_of() == ((16,) * 8 + (17,) * 8, 18)  # endpoints after ranks
    assert load_topology("dgx-h100x2").reducing_switches_of() == ((16,) * 8 + (17,) * 8, None)
    classes = link_classes(net)
    assert all((cls == "net") == ("fabric" in link.label) for cls, link in zip(
        classes, net.links, strict=True))
    assert set(classes) == {"net", "nvlink"}
    assert set(link_classes(load_topology("pcie-gen4-8gpu"))) == {"pcie"}
    v100 = load_topology("dgx1-v100")
    gpus = set(v100.rank_devices)
    assert all((cls == "nvlink") == (link.src in gpus and link.dst in gpus)
               for cls, link in zip(link_classes(v100), v100.links, strict=True))
