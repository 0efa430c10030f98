"""Grid parsing: axes, ranges, scalars, relative files, expansion order, and the errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_helpers import DDP, RING8

from commsim.errors import SpecError
from commsim.sweep import CollectivePoint, Grid, WorkloadPoint, load_grid


def test_file_grid_resolves_names_and_relative_files(grid_file: Path) -> None:
    grid = load_grid(grid_file)
    assert [t.label for t in grid.topologies] == ["dgx-h100x2", "ring8"]
    assert [t.ranks for t in grid.topologies] == [16, 8]
    assert grid.ranks == (4, 12)
    assert grid.engine == ("des", "analytic")
    assert grid.collectives == ("all_reduce", "all_gather")
    assert grid.algorithms == ("ring", "double_binary_tree", "rabenseifner", "auto")
    assert grid.sizes == (1024, 65536, 1048576)
    assert [w.label for w in grid.workloads] == ["ddp.yaml", "small-ddp"]
    assert len(grid) == 2 * 2 * 2 * 2 * 4 * 3 + 2 * 2 == len(list(grid.points()))


def test_relative_files_resolve_against_the_grid_directory(
    grid_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_grid(grid_file).topologies[1].label == "ring8"


def test_expansion_order_topologies_outermost_sizes_fastest() -> None:
    grid = load_grid(
        {
            "topologies": ["dgx-h100", RING8],
            "engine": ["des", "analytic"],
            "collectives": ["all_reduce", "all_gather"],
            "algorithms": ["ring", "auto"],
            "sizes": ["1KiB:2KiB"],
            "workloads": [DDP],
        }
    )
    points = list(grid.points())
    coll = [p for p in points if isinstance(p, CollectivePoint)]
    keys = [(p.topology.label, p.engine, p.collective, p.algorithm, p.nbytes) for p in coll]
    expected = [
        (t, e, c, a, n)
        for t in ("dgx-h100", "ring-8")
        for e in ("des", "analytic")
        for c in ("all_reduce", "all_gather")
        for a in ("ring", "auto")
        for n in (1024, 2048)
    ]
    assert keys == expected
    tail = points[len(coll) :]
    assert all(isinstance(p, WorkloadPoint) for p in tail)
    assert [p.topology.label for p in tail] == ["dgx-h100", "ring-8"]  # type: ignore[union-attr]
    assert [p.workload.label for p in tail] == ["ddp[0]", "ddp[0]"]  # type: ignore[union-attr]


def test_scalars_aliases_and_defaults() -> None:
    grid = load_grid({"topologies": "dgx-h100", "collectives": "AllReduce", "sizes": "4KiB"})
    assert grid.collectives == ("all_reduce",)
    assert grid.algorithms == ("auto",) and grid.engine == ("des",)
    assert grid.ranks == (None,) and grid.chunks == (None,)
    grid = load_grid(
        {"topologies": ["dgx-h100"], "collectives": ["all-gather"], "sizes": ["8M"],
         "algorithms": ["Binomial-Tree"], "chunks": [None, 4]}
    )  # fmt: skip
    assert grid.algorithms == ("binomial_tree",) and grid.chunks == (None, 4)
    assert grid.sizes == (8 * 2**20,)


def test_workloads_only_grid() -> None:
    grid = load_grid({"topologies": ["dgx-h100"], "workloads": [DDP]})
    assert len(grid) == 1 and not grid.collectives


def test_a_grid_object_is_returned_as_is() -> None:
    grid = load_grid({"topologies": "dgx-h100", "workloads": DDP})
    assert isinstance(grid, Grid) and load_grid(grid) is grid


BAD = [
    ({"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": "1KiB", "size": 1},
     "size: unknown key (allowed: "),
    ({"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": ["5XB"]},
     "sizes[0]: unknown size unit 'XB' (got '5XB')"),
    ({"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": ["1MiB:1KiB"]},
     "sizes[0]: MAX < MIN"),
    ({"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": []},
     "sizes: must list at least one value (got an empty list)"),
    ({"topologies": "dgx-h100", "collectives": ["all_reduce", "gather"], "sizes": "1B"},
     "collectives[1]: unknown collective 'gather'"),
    ({"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": "1B", "algorithms": ["rign"]},
     "algorithms[0]: unknown algorithm 'rign'"),
    ({"topologies": ["dgx-h100", "no-such-machine"], "collectives": "all_reduce", "sizes": "1B"},
     "topologies[1]: unknown topology 'no-such-machine'"),
    ({"topologies": ["dgx-h100x0"], "collectives": "all_reduce", "sizes": "1B"},
     "topologies[0]: topology 'dgx-h100x0': bad node-count suffix"),
    ({"topologies": [{"kind": "ring", "ranks": 4}], "collectives": "all_reduce", "sizes": "1B"},
     "topologies[0]: "),
    ({"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": "1B", "engine": "fast"},
     "engine[0]: unknown engine (got 'fast'"),
    ({"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": "1B", "ranks": [0]},
     "ranks[0]: must be a positive integer (got 0)"),
    ({"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": "1B", "chunks": [True]},
     "chunks[0]: must be a positive integer (got True)"),
    ({"topologies": "dgx-h100", "collectives": "all_reduce"}, "sizes: missing"),
    ({"collectives": "all_reduce", "sizes": "1B"}, "topologies: missing"),
    ({"topologies": "dgx-h100"}, "nothing to sweep"),
    ({"topologies": "dgx-h100", "workloads": [DDP], "sizes": "1B"},
     "sizes: applies to collectives"),
    ({"topologies": "dgx-h100", "workloads": ["missing.yaml"]},
     "workloads[0]: no such workload file"),
    ({"topologies": "dgx-h100", "workloads": [{"kind": "ddp", "layers": 0}]}, "workloads[0]: "),
    (["dgx-h100"], "a grid must be a mapping"),
    ({"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": [1024]},
     "sizes[0]: 1024 has no unit (write 1024B, 1024KiB or 1024MiB)"),
    ({"topologies": "dgx-h100", "collectives": "all_reduce", "sizes": ["1:4KiB"]},
     "sizes[0]: 1 has no unit"),
    ({"topologies": ["dgx-h100", "dgx-a100"], "collectives": ["all_reduce", "all_gather"],
      "sizes": "1B:1PiB:1.01", "chunks": list(range(1, 100))},
     "the grid has 1258092 points, more than the 1000000 one sweep runs"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "message"), BAD)
def test_malformed_grids_name_the_value(data: object, message: str, tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_grid(data, base=tmp_path)  # type: ignore[arg-type]
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_file_errors_name_the_grid_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such grid file"):
        load_grid(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("topologies: [dgx-h100\n")
    with pytest.raises(SpecError, match=r"bad\.yaml: invalid YAML"):
        load_grid(bad)
    missing_topology = tmp_path / "g.yaml"
    missing_topology.write_text("topologies: [ring.yaml]\ncollectives: all_reduce\nsizes: 1B\n")
    with pytest.raises(SpecError, match=r"g\.yaml: topologies\[0\]: unknown topology 'ring\.yaml'"):
        load_grid(missing_topology)
