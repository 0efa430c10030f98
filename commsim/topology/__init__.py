"""Topologies: YAML/preset/Python descriptions of a machine -> a built :class:`Network`.

The flow is one way: YAML or a dict (:mod:`.loader`) -> a validated spec (:mod:`.spec`) ->
a network with devices, directed links and an O(path) router (:mod:`.build`, :mod:`.routing`).
:func:`load_topology` accepts any of a preset name (``"dgx-h100x4"``), a file, a dict, a spec
or a Network. See ``docs/topologies.md`` for the format, the kinds and the presets' sources.
"""

from commsim.topology.build import build_network
from commsim.topology.constructors import (
    custom,
    fully_connected,
    hierarchical,
    ring,
    shared,
    switch,
    torus,
)
from commsim.topology.loader import parse_link, read_spec_file, spec_from_dict
from commsim.topology.presets import (
    PresetInfo,
    list_presets,
    load_topology,
    preset_names,
    preset_spec,
    topology_spec,
)
from commsim.topology.spec import (
    CustomLinkSpec,
    CustomSpec,
    DeviceSpec,
    FullyConnectedSpec,
    HierarchicalSpec,
    LinkSpec,
    RingSpec,
    SharedSpec,
    SwitchSpec,
    TopologySpec,
    TorusSpec,
)

__all__ = [
    "CustomLinkSpec",
    "CustomSpec",
    "DeviceSpec",
    "FullyConnectedSpec",
    "HierarchicalSpec",
    "LinkSpec",
    "PresetInfo",
    "RingSpec",
    "SharedSpec",
    "SwitchSpec",
    "TopologySpec",
    "TorusSpec",
    "build_network",
    "custom",
    "fully_connected",
    "hierarchical",
    "list_presets",
    "load_topology",
    "parse_link",
    "preset_names",
    "preset_spec",
    "read_spec_file",
    "ring",
    "shared",
    "spec_from_dict",
    "switch",
    "topology_spec",
    "torus",
]
