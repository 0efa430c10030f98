"""Replay's collective overrides: workload keys and command-line flags, and that every
collective is timed as ``commsim run`` times it."""

from __future__ import annotations

import json

import pytest

import commsim
from commsim.cli import main
from commsim.errors import SpecError
from commsim.replay.step import replay

DDP = {"kind": "ddp", "layers": 2, "forward_time": 0, "backward_time": "1ms",
       "grad_bytes": "8MiB", "bucket_bytes": "8MiB"}


def _ran(result) -> set[tuple[str, str | None]]:
    return {(c["algorithm"], c["protocol"]) for c in result.collectives()}


def test_buckets_run_as_commsim_run_chooses() -> None:
    """Each DDP bucket's all-reduce has the algorithm, protocol and duration ``commsim run``
    gives the same call (here NCCL's pipelined trees across 4 DGX H100)."""
    result = replay(DDP, "dgx-h100x4")
    run = commsim.simulate("all_reduce", "dgx-h100x4", "8MiB")
    assert _ran(result) == {(run.algorithm, run.protocol)}
    for c in result.collectives():
        assert c["end_s"] - c["start_s"] == pytest.approx(run.time_s, rel=1e-9)


def test_workload_keys_and_their_precedence() -> None:
    """``protocol:`` applies to every collective, ``protocols:``/``algorithms:`` per kind win
    over it, and the command line wins over the file."""
    simple = commsim.simulate("all_reduce", "dgx-h100", "8MiB", protocol="Simple")
    assert _ran(replay({**DDP, "protocol": "simple"}, "dgx-h100")) == {
        (simple.algorithm, "Simple")
    }
    keyed = {**DDP, "protocol": "LL", "protocols": {"all_reduce": "LL128"},
             "algorithms": {"allreduce": "double_binary_tree"}}
    assert _ran(replay(keyed, "dgx-h100")) == {("double_binary_tree", "LL128")}
    forced = replay(keyed, "dgx-h100", algorithm="ring", protocol="Simple")
    assert _ran(forced) == {("ring", "Simple")}
    plain = replay(DDP, "dgx-h100", protocol="none", algorithm="ring")
    assert _ran(plain) == {("ring", None)}


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"protocol": "LL64"}, "protocol: unknown protocol 'LL64'"),
        ({"algorithms": {"all_reduce": "magic"}}, "algorithms.all_reduce: unknown algorithm"),
        ({"protocols": {"all_mix": "LL"}}, "protocols.all_mix"),
        ({"protocols": "LL"}, "protocols: must be a mapping"),
    ],
)
def test_bad_overrides_name_the_field(extra: dict[str, object], needle: str) -> None:
    """A bad override is a SpecError naming its field path and value."""
    with pytest.raises(SpecError, match=needle):
        replay({**DDP, **extra}, "dgx-h100")


def test_command_line_flags(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    """``commsim replay --algorithm/--protocol`` reach every collective; --json lists them."""
    path = tmp_path / "ddp.yaml"
    path.write_text(json.dumps(DDP))
    argv = ["replay", str(path), "-t", "dgx-h100", "--json"]
    assert main([*argv, "--algorithm", "ring", "--protocol", "LL128"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {(c["algorithm"], c["protocol"]) for c in out["collectives"]} == {("ring", "LL128")}
    assert main([*argv, "--protocol", "LL64"]) == 2
    assert "LL64" in capsys.readouterr().err
