"""Topology YAML is read strictly: every bad input is a one-line SpecError with its field path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from commsim.errors import SpecError
from commsim.topology import load_topology, read_spec_file, spec_from_dict

RING = "kind: ring\nranks: 4\nlink: {latency: 1us, bandwidth: 100GB/s}\n"
HIER = "kind: hierarchical\nnodes: 2\ngpus_per_node: 8\nintra: {latency: 1us, bandwidth: 1GB/s}\n"
CUSTOM = """\
kind: custom
devices:
  - {name: a}
  - {name: sw, kind: switch}
  - {name: b}
links:
  - {src: a, dst: sw, latency: 1us, bandwidth: 10GB/s}
  - {src: sw, dst: b, latency: 1us, bandwidth: 10GB/s}
"""


def write(tmp_path: Path, text: str, name: str = "topo.yaml") -> Path:
    """Write ``text`` to a topology file in ``tmp_path``."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The message of the SpecError raised by loading ``text`` as ``topo.yaml``."""
    write(tmp_path, text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as info:
        load_topology("topo.yaml")
    message = str(info.value)
    assert "\n" not in message
    return message


def test_valid_files_of_every_kind_load(tmp_path: Path) -> None:
    """One well-formed file per kind loads (every latency and bandwidth with its unit; a
    unit-less 0 latency is allowed)."""
    texts = [
        RING,
        "kind: fully_connected\nranks: 3\nlink: {latency: 0, bandwidth: 1e11B/s}\n",
        "kind: torus\ndims: [4, 4]\nlink: {latency: 1us, bandwidth: 45GB/s}\n",
        "kind: switch\nranks: 4\nlink: {latency: 2us, bandwidth: 400Gbps}\n",
        "kind: hierarchical\nnodes: 4\ngpus_per_node: 8\n"
        "intra: {latency: 2us, bandwidth: 450GB/s}\ninter: {latency: 5us, bandwidth: 50GB/s}\n",
        CUSTOM,
    ]
    ranks = [4, 3, 16, 4, 32, 2]
    for i, (text, count) in enumerate(zip(texts, ranks, strict=True)):
        net = load_topology(write(tmp_path, text, f"t{i}.yaml"))
        assert net.ranks == count
        assert net.name == f"t{i}"  # a file without ``name`` is named after its stem


def test_optional_common_keys(tmp_path: Path) -> None:
    """``name``, ``description``, ``sources`` and ``gamma`` are accepted on every kind."""
    text = RING + "name: lab\ndescription: a test ring\nsources: [my notes]\ngamma: 2ns\n"
    net = load_topology(write(tmp_path, text))
    assert net.name == "lab"
    assert net.gamma_s_per_B == pytest.approx(2e-9)
    assert net.meta["sources"] == ("my notes",) and net.meta["description"] == "a test ring"


def test_exact_message_for_bad_dims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dims entry < 1 is reported with the file, the field path and the value."""
    text = "kind: torus\ndims: [4, -4]\nlink: {latency: 1us, bandwidth: 45GB/s}\n"
    assert load_error(tmp_path, text, monkeypatch) == (
        "topo.yaml: dims[1]: must be a positive integer (got -4)"
    )


def test_exact_message_for_zero_bandwidth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bandwidth 0 is reported with the file, the field path and the value as written."""
    text = RING.replace("100GB/s", "0GB/s")
    assert load_error(tmp_path, text, monkeypatch) == (
        "topo.yaml: link.bandwidth: must be > 0 (got '0GB/s')"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: ring\nranks: [4\n", "topo.yaml: invalid YAML"),
        ("kind: ring\n  ranks: 4\n", "topo.yaml: invalid YAML"),
        (RING + "---\n" + RING, "topo.yaml: expected one YAML document, found 2"),
        ("- 1\n- 2\n", "topo.yaml: a topology must be a mapping with a 'kind' key (got a list)"),
        ("just a string\n", "topo.yaml: a topology must be a mapping"),
        ("", "topo.yaml: empty topology file"),
        (RING + "ranks: 5\n", "topo.yaml: duplicate key 'ranks' at line 4"),
        ("ranks: 4\n", "topo.yaml: kind: missing required key (one of: custom, fully_connected"),
        (RING.replace("ring", "mesh"), "topo.yaml: kind: unknown topology kind (got 'mesh'"),
        (RING + "rank: 4\n", "topo.yaml: rank: unknown key for kind 'ring' (allowed:"),
        (RING.replace("bandwidth", "bandwith"), "topo.yaml: link.bandwith: unknown key (allowed:"),
        ("kind: ring\nranks: 4\n", "topo.yaml: link: missing required key for kind 'ring'"),
        (
            RING.replace("bandwidth: 100GB/s", "bandwidth: -5GB/s"),
            "topo.yaml: link.bandwidth: must not be negative (got '-5GB/s')",
        ),
        (RING.replace("1us", "-1us"), "topo.yaml: link.latency: must not be negative (got '-1us')"),
        (
            RING.replace("1us", "10 parsecs"),
            "topo.yaml: link.latency: unknown time unit 'parsecs' (got '10 parsecs')",
        ),
        (RING.replace("100GB/s", "fast"), "topo.yaml: link.bandwidth: "),
        (RING.replace("1us", "null"), "topo.yaml: link.latency: not a time (got nothing (null))"),
        (
            RING.replace("100GB/s", "1e300GB/s"),
            "topo.yaml: link.bandwidth: too large (got '1e300GB/s')",
        ),
        (
            RING.replace("ranks: 4", "ranks: 0"),
            "topo.yaml: ranks: must be a positive integer (got 0)",
        ),
        (RING.replace("ranks: 4", "ranks: -2"), "topo.yaml: ranks: must be a positive integer"),
        (RING.replace("ranks: 4", "ranks: 4.5"), "topo.yaml: ranks: must be a positive integer"),
        (RING.replace("ranks: 4", "ranks: '4'"), "topo.yaml: ranks: must be a positive integer"),
        (RING.replace("ranks: 4", "ranks: true"), "topo.yaml: ranks: must be a positive integer"),
        (
            RING.replace("link: {latency: 1us, bandwidth: 100GB/s}", "link: 5"),
            "topo.yaml: link: must be a mapping (got 5)",
        ),
        (
            "kind: torus\ndims: [4, 0]\nlink: {latency: 1us, bandwidth: 1GB/s}\n",
            "topo.yaml: dims[1]: must be a positive integer (got 0)",
        ),
        (
            "kind: torus\ndims: []\nlink: {latency: 1us, bandwidth: 1GB/s}\n",
            "topo.yaml: dims: must be a non-empty list of positive integers",
        ),
        (
            "kind: torus\ndims: 4\nlink: {latency: 1us, bandwidth: 1GB/s}\n",
            "topo.yaml: dims: must be a non-empty list",
        ),
        (
            HIER,
            "topo.yaml: inter: missing required key for kind 'hierarchical'",
        ),
        (
            HIER + "inter: {latency: 1us, bandwidth: 0}\n",
            "topo.yaml: inter.bandwidth: must be > 0 (got 0)",
        ),
        (RING + "gamma: 1 parsec\n", "topo.yaml: gamma: unknown time unit 'parsec'"),
        (RING + "sources: a paper\n", "topo.yaml: sources: must be a list (got 'a paper')"),
        (RING + "sources: [3]\n", "topo.yaml: sources[0]: must be a non-empty string (got 3)"),
        (RING + "description: [x]\n", "topo.yaml: description: must be a string"),
        (CUSTOM.replace("dst: b", "dst: c"), "topo.yaml: links[1].dst: unknown device 'c'"),
        (
            CUSTOM.replace(
                "dst: b, latency: 1us, bandwidth: 10GB/s", "dst: b, latency: 1us, bandwidth: 0"
            ),
            "topo.yaml: links[1].bandwidth: must be > 0 (got 0)",
        ),
        (
            CUSTOM.replace("{name: b}", "{name: a}"),
            "topo.yaml: devices[2].name: duplicate device name 'a'",
        ),
        (CUSTOM.replace("{name: b}", "{nam: b}"), "topo.yaml: devices[2].nam: unknown key"),
        (
            CUSTOM.replace("{name: b}", "{name: b, host: -1}"),
            "topo.yaml: devices[2].host: must be an integer >= 0 (got -1)",
        ),
        (CUSTOM + "ranks: [a, x]\n", "topo.yaml: ranks[1]: unknown device 'x'"),
        (CUSTOM + "ranks: [a, a]\n", "topo.yaml: ranks[1]: device 'a' listed twice"),
        (
            CUSTOM.replace("dst: sw, latency", "dst: a, latency"),
            "topo.yaml: links[0].dst: a link cannot join 'a' to itself",
        ),
        (
            CUSTOM.replace("10GB/s}\n  - {src: sw", "10GB/s, duplex: maybe}\n  - {src: sw"),
            "topo.yaml: links[0].duplex: must be true or false (got 'maybe')",
        ),
    ],
)
def test_bad_files_raise_one_line_errors_with_field_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str
) -> None:
    """Malformed YAML, several documents, non-mappings, unknown kinds/keys, missing keys,
    wrong types, bad units and out-of-range values all name the file and the field path."""
    assert load_error(tmp_path, text, monkeypatch).startswith(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HIER + "inter: {latency: 2, bandwidth: 1GB/s}\n",
         "topo.yaml: inter.latency: 2 has no unit (write 2us, 2ms or 2s)"),
        (RING.replace("100GB/s", "1e11"),
         "topo.yaml: link.bandwidth: 1e11 has no unit (write 1e11B/s, or e.g. 100GB/s)"),
        (RING.replace("100GB/s", "'100'"),
         "topo.yaml: link.bandwidth: 100 has no unit (write 100GB/s, 100Gbps or 100B/s)"),
        (RING + "gamma: 1.0e-12\n",
         "topo.yaml: gamma: 1e-12 has no unit (write 1e-12s, or e.g. 1us)"),
        (CUSTOM.replace("latency: 1us, bandwidth: 10GB/s}\n  - {src: sw",
                        "latency: 0.5, bandwidth: 10GB/s}\n  - {src: sw"),
         "topo.yaml: links[0].latency: 0.5 has no unit (write 0.5s, or e.g. 1us)"),
    ],
)
def test_unitless_quantities_are_errors_showing_the_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str
) -> None:
    """A latency, bandwidth or gamma written without a unit is an error naming the field path
    and showing how to write it (issue 13: inputs that cannot surprise)."""
    assert load_error(tmp_path, text, monkeypatch) == expected


def test_unitless_zero_and_counts_are_plain_numbers(tmp_path: Path) -> None:
    """``0`` needs no unit (zero seconds is zero anything); counts stay plain integers."""
    text = "kind: torus\ndims: [2, 3]\nlink: {latency: 0, bandwidth: 1GB/s}\ngamma: 0\n"
    net = load_topology(write(tmp_path, text))
    assert net.ranks == 6 and net.gamma_s_per_B == 0.0


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"kind": "fully_connected", "ranks": 1025}, "at most 1024 ranks (got 1025)"),
        ({"kind": "ring", "ranks": 70000}, "a ring topology has at most 65536 ranks (got 70000)"),
        ({"kind": "torus", "dims": [512, 512], "link": None}, "link: must be a mapping"),
        ({"kind": "torus", "dims": [512, 256]}, "a torus topology has at most 65536 ranks"),
    ],
)
def test_rank_counts_beyond_the_kind_are_errors(data: dict, expected: str) -> None:
    """Each kind has a largest rank count (fully_connected: a link per pair, 1024; others
    65536); beyond it the spec is refused before anything is built."""
    base = {"link": {"latency": "1us", "bandwidth": "1GB/s"}}
    with pytest.raises(SpecError, match=re.escape(expected)):
        spec_from_dict(base | data)


def test_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing file is an 'unknown topology' error naming it (and listing the presets);
    reading it directly says the file does not exist."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        SpecError,
        match=r"^unknown topology 'nope.yaml' \(not a preset or a file;"
        r" presets: .*dgx-h100",
    ):
        load_topology("nope.yaml")
    with pytest.raises(SpecError, match="unknown topology 'nope.yaml'"):
        load_topology(Path("nope.yaml"))
    with pytest.raises(SpecError, match="^nope.yaml: no such topology file$"):
        read_spec_file("nope.yaml")


def test_dict_specs_use_the_same_rules() -> None:
    """An already-parsed dict is validated exactly like a file (without a file prefix)."""
    assert (
        load_topology(
            {"kind": "switch", "ranks": 3, "link": {"latency": "1us", "bandwidth": "1GB/s"}}
        ).ranks
        == 3
    )
    with pytest.raises(SpecError, match=r"^link.bandwidth: must be > 0 \(got '0GB/s'\)$"):
        spec_from_dict(
            {"kind": "switch", "ranks": 3, "link": {"latency": "1us", "bandwidth": "0GB/s"}}
        )
    with pytest.raises(SpecError, match=r"^src.yaml: ranks: must be a positive integer \(got 0\)$"):
        spec_from_dict({"kind": "ring", "ranks": 0, "link": {}}, "src.yaml")


def test_non_topology_arguments_are_rejected() -> None:
    """load_topology of something that is not a name, path, dict or Network is a SpecError."""
    with pytest.raises(SpecError, match="a topology must be a preset name"):
        load_topology(42)  # type: ignore[arg-type]
