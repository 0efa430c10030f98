"""The optional ``algorithms:`` mapping of a topology file, and writing specs back as YAML."""

from __future__ import annotations

import dataclasses

import pytest

from commsim import api
from commsim.errors import SpecError
from commsim.topology import load_topology, preset_names, topology_spec
from commsim.topology.dump import dump_yaml
from commsim.topology.loader import parse_yaml, spec_from_dict

BASE = {"kind": "switch", "ranks": 4, "link": {"latency": "1us", "bandwidth": "10GB/s"}}


def test_auto_uses_the_mapped_algorithm_and_explicit_choices_still_win() -> None:
    """Mapped collectives use their algorithm under auto; others are ranked as before; an
    explicit --algorithm overrides the mapping; spellings are canonicalised."""
    topo = dict(BASE, algorithms={"AllReduce": "binomial-tree", "bcast": "ring"})
    net = load_topology(topo)
    assert net.meta["algorithms"] == {"all_reduce": "binomial_tree", "broadcast": "ring"}
    assert api.simulate("all_reduce", topo, "1MiB").algorithm == "binomial_tree"
    assert api.simulate("broadcast", topo, "1MiB").algorithm == "ring"
    free = api.simulate("all_gather", BASE, "1MiB").algorithm
    assert api.simulate("all_gather", topo, "1MiB").algorithm == free
    assert api.simulate("all_reduce", topo, "1MiB", algorithm="ring").algorithm == "ring"


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"all_reduce": "nope"}, "algorithms.all_reduce: unknown algorithm 'nope'"),
        ({"gather": "ring"}, "algorithms: unknown collective 'gather'"),
        ({"broadcast": "double_binary_tree"}, "cannot run broadcast"),
        ({"all_reduce": "ring", "allreduce": "ring"}, "listed twice"),
        ({"all_reduce": 3}, "algorithms.all_reduce: must be a non-empty string"),
        (["ring"], "algorithms: must be a mapping"),
    ],
)
def test_bad_mappings_are_spec_errors(mapping: object, message: str) -> None:
    """Unknown names, impossible pairs and wrong types are one-line SpecErrors with the path."""
    with pytest.raises(SpecError, match=message):
        load_topology(dict(BASE, algorithms=mapping))


@pytest.mark.parametrize("name", [*preset_names(), "dgx-h100x4"])
def test_dump_round_trips_every_preset(name: str) -> None:
    """dump_yaml writes a spec that loads back equal (with a mapping and gamma added)."""
    spec = dataclasses.replace(
        topology_spec(name), algorithms=(("all_reduce", "ring"),), gamma_s_per_B=2.5e-12
    )
    assert spec_from_dict(parse_yaml(dump_yaml(spec), name)) == spec
