"""``base: PRESET``: a topology written as a preset plus what differs (RFC 7396 merge patch),
and ``commsim topologies NAME``, which prints a preset's file to start from."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import commsim
from commsim.cli import main
from commsim.errors import CommsimError
from commsim.nccl_tables import NcclConfig
from commsim.topology import load_topology
from commsim.topology.preset_files import merge_patch, preset_data, preset_text, with_base

COLLECTIVES = ("all_reduce", "all_gather", "broadcast")
SIZES = (4096, 1 << 20, 1 << 30)


def _times(topology: object, ranks: int | None = None) -> list[float]:
    return [commsim.simulate(c, topology, n, ranks=ranks).time_s
            for c in COLLECTIVES for n in SIZES]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def test_merge_patch_is_rfc_7396() -> None:
    """Mappings merge key by key, null removes a key, any other value (lists too) replaces;
    neither argument is modified."""
    target = {"a": {"b": 1, "c": [1, 2]}, "d": 4, "e": {"f": 5}}
    patch = {"a": {"c": [3], "g": {"h": 1}}, "d": None, "e": 7}
    kept_target, kept_patch = copy.deepcopy(target), copy.deepcopy(patch)
    assert merge_patch(target, patch) == {"a": {"b": 1, "c": [3], "g": {"h": 1}}, "e": 7}
    assert target == kept_target and patch == kept_patch


def test_only_the_node_count_changed_is_the_xN_preset() -> None:
    """``base: dgx-h100`` with ``nodes: 2`` predicts what ``dgx-h100x2`` does; a server preset
    (``kind: server``) likewise."""
    assert _times({"base": "dgx-h100", "nodes": 2}) == _times("dgx-h100x2")
    assert _times({"base": "aws-p4d", "nodes": 2}) == _times("aws-p4dx2")


def test_a_slower_network_slows_only_what_crosses_it(tmp_path: Path) -> None:
    """Half the NICs in use (each GPU's share halved) slows a 1 GiB all_reduce across two nodes
    and leaves one node's calls as they were."""
    path = _write(tmp_path, "base: dgx-h100\nnodes: 2\ninter: {bandwidth: 23GB/s}\n")
    edited = load_topology(path)
    assert edited.name == "cluster" and edited.ranks == 16
    across = commsim.simulate("all_reduce", edited, "1GiB").time_s
    assert across > commsim.simulate("all_reduce", "dgx-h100x2", "1GiB").time_s
    assert _times(edited, ranks=8) == _times("dgx-h100")


def test_null_removes_a_key_and_a_partial_block_keeps_the_rest() -> None:
    """``reduction_bandwidth: null`` takes NVLS away; ``nccl: {version: ...}`` changes the
    release and keeps the preset's arch and channels."""
    without = load_topology({"base": "dgx-h100", "intra": {"reduction_bandwidth": None}})
    with pytest.raises(CommsimError):
        commsim.simulate("all_reduce", without, "1GiB", algorithm="nvls")
    assert commsim.simulate("all_reduce", without, "1GiB").algorithm != "nvls"
    release = NcclConfig.of(load_topology({"base": "dgx-h100", "nccl": {"version": "2.21"}}))
    preset = NcclConfig.of(load_topology("dgx-h100"))
    assert (release.version, release.arch, release.channels) == ("2.21", preset.arch,
                                                                preset.channels)


def test_the_description_says_what_was_edited_and_the_preset_is_untouched() -> None:
    """The description names the preset and the keys changed, unless the file gives its own;
    the shared, cached preset data is not modified by a merge."""
    before = {name: copy.deepcopy(preset_data(name)) for name in ("dgx-h100", "aws-p4d")}
    merged = with_base({"base": "dgx-h100", "nodes": 4, "inter": {"latency": "5us"}})
    assert isinstance(merged, dict)
    assert merged["description"].startswith("dgx-h100, edited (inter, nodes): DGX H100")
    load_topology(merged)
    load_topology({"base": "aws-p4d", "nodes": 2, "nics": {"gpus": [[0, 1, 2, 3]]}})
    assert {name: preset_data(name) for name in before} == before
    own = with_base({"base": "dgx-h100", "description": "ours"})
    assert isinstance(own, dict) and own["description"] == "ours"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("base: dgx-h10\n", "base: unknown preset 'dgx-h10'"),
        ("base: dgx-h100x2\n", "base: unknown preset 'dgx-h100x2' (a preset's own name"),
        ("base: [dgx-h100]\n", "base: must be a preset's name (got a list)"),
        ("base: dgx-h100\nkind: ring\n", "kind: a topology with base: keeps its preset's kind"),
        ("base: dgx-h100\ninter: {bandwith: 2GB/s}\n", "inter.bandwith: unknown key"),
        ("base: dgx-h100\nnodes: 0\n", "nodes: must be a positive integer (got 0)"),
        ("base: dgx-h100\nintra: {bandwidth: 5}\n", "intra.bandwidth: 5 has no unit"),
    ],
)
def test_bad_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                text: str, message: str) -> None:
    """Each mistake is one line naming the file, the field and the value, exit status 2."""
    path = _write(tmp_path, text)
    assert main(["run", "all_reduce", "-t", str(path), "-s", "1MiB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and message in err, err


def test_topologies_name_prints_the_presets_file(capsys: pytest.CaptureFixture[str]) -> None:
    """``commsim topologies NAME`` prints the shipped file; ``--json`` its listing object; an
    unknown name is one line, exit 2."""
    assert main(["topologies", "pcie-gen3-2gpu"]) == 0
    out = capsys.readouterr().out
    root = Path(__file__).resolve().parents[2]
    assert out == preset_text("pcie-gen3-2gpu") == (root / "topologies" /
                                                      "pcie-gen3-2gpu.yaml").read_text()
    assert main(["topologies", "dgx-h100", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["name"], row["kind"], row["ranks"]) == ("dgx-h100", "hierarchical", 8)
    assert main(["topologies", "dgx-h100x2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown preset 'dgx-h100x2'" in err
