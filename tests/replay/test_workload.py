"""Workload files: strict YAML, every bad value a one-line SpecError naming its field path."""

from __future__ import annotations

from pathlib import Path

import pytest

from commsim.errors import SpecError
from commsim.replay import load_workload, replay

TOPO = {"kind": "fully_connected", "ranks": 4, "link": {"latency": "1us", "bandwidth": "1GB/s"}}
PIPE = {
    "kind": "pipeline",
    "schedule": "gpipe",
    "stages": 4,
    "microbatches": 8,
    "forward_time": "1ms",
    "backward_time": "2ms",
}
DDP = {
    "kind": "ddp",
    "layers": 2,
    "forward_time": "1ms",
    "backward_time": "10ms",
    "grad_bytes": "25MiB",
}
FSDP = {
    "kind": "fsdp",
    "units": 8,
    "params_per_unit": "100M",
    "forward_time": "5ms",
    "backward_time": "10ms",
}


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ({**PIPE, "stages": 0}, r"^stages: must be a positive integer \(got 0\)"),
        ({**PIPE, "microbatches": -2}, r"^microbatches: must be a positive integer \(got -2\)"),
        (
            {**PIPE, "schedule": "zigzag"},
            r"^schedule: must be one of gpipe, 1f1b, interleaved \(got 'zigzag'\)",
        ),
        ({**PIPE, "stages": 8}, r"^stages: 8 stages need 8 ranks"),
        (
            {**PIPE, "schedule": "interleaved", "microbatches": 6, "chunks_per_stage": 2},
            r"^microbatches: interleaved needs a multiple of stages \(4\), got 6",
        ),
        ({**PIPE, "chunks_per_stage": 2}, r"^chunks_per_stage: must be 1 for schedule 'gpipe'"),
        ({**PIPE, "forward_time": "-1ms"}, r"^forward_time: must not be negative \(got '-1ms'\)"),
        (
            {**PIPE, "forward_time": ["1ms", "1ms"]},
            r"^forward_time: need one value per stage \(4\) \(got a list of 2\)",
        ),
        ({**PIPE, "stagse": 4}, r"^stagse: unknown key for kind 'pipeline'"),
        ({**DDP, "layers": 0}, r"^layers: must be a positive integer \(got 0\)"),
        ({**DDP, "layers": []}, r"^layers: must not be empty"),
        (
            {**DDP, "layers": [{"forward_time": "1ms", "grad_bytes": "-1MiB"}]},
            r"^layers\[0\].grad_bytes: must not be negative",
        ),
        ({**DDP, "layers": [{"forwrd_time": "1ms"}]}, r"^layers\[0\].forwrd_time: unknown key"),
        ({**DDP, "bucket_bytes": 0}, r"^bucket_bytes: must be > 0"),
        ({**DDP, "bucket_bytes": 1024}, r"^bucket_bytes: 1024 has no unit \(write 1024B, "),
        ({**PIPE, "forward_time": 0.001}, r"^forward_time: 0.001 has no unit \(write 0.001s, "),
        ({**PIPE, "forward_time": [1, 2, 3, 4]}, r"^forward_time\[0\]: 1 has no unit"),
        ({**DDP, "accumulation_steps": 0}, r"^accumulation_steps: must be a positive integer"),
        ({**DDP, "algorithm": "carrier_pigeon"}, r"^algorithm: unknown algorithm 'carrier_pigeon'"),
        ({**DDP, "grad_bytes": "25XB"}, r"^grad_bytes: unknown size unit 'XB' \(got '25XB'\)"),
        (
            {"kind": "ddp", "layers": 2, "forward_time": "1ms"},
            r"^backward_time: missing required key",
        ),
        ({**FSDP, "units": 0}, r"^units: must be a positive integer"),
        ({**FSDP, "prefetch": -1}, r"^prefetch: must be an integer >= 0 \(got -1\)"),
        ({**FSDP, "params_per_unit": 0}, r"^params_per_unit: must be a positive whole number"),
        (
            {**FSDP, "reshard_after_forward": "yes"},
            r"^reshard_after_forward: must be true or false",
        ),
        ({**FSDP, "prefech": 1}, r"^prefech: unknown key for kind 'fsdp'"),
        (
            {
                "kind": "tensor",
                "layers": 0,
                "forward_time": "1s",
                "backward_time": "1s",
                "allreduce_bytes": "1B",
            },
            r"^layers: must be a positive integer",
        ),
        ({"kind": "moe"}, r"^kind: unknown workload kind 'moe' \(known: ddp, fsdp, pipeline"),
        ({"layers": 2}, r"^kind: missing required key"),
        (["not", "a", "mapping"], r"must be a mapping"),
    ],
)
def test_bad_workloads_are_spec_errors_naming_the_field(workload: object, message: str) -> None:
    """Zero or negative counts, unknown schedules or keys, too many stages: one-line SpecErrors."""
    with pytest.raises(SpecError, match=message) as info:
        replay(workload, TOPO)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_yaml_file_round_trip(tmp_path: Path) -> None:
    """A workload file with unit strings loads into the same spec as the dict."""
    path = tmp_path / "ddp.yaml"
    path.write_text(
        "kind: ddp\nlayers: 2\nforward_time: 1ms\nbackward_time: 10ms\n"
        "grad_bytes: 25MiB\nbucket_bytes: 25MiB\nalgorithm: ring\noptimizer_time: 0\n"
    )
    assert load_workload(path) == load_workload(
        {**DDP, "algorithm": "ring", "bucket_bytes": "25MiB", "optimizer_time": 0}
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: ddp\nkind: fsdp\n", "duplicate key 'kind' at line 2"),
        ("kind: [ddp\n", "invalid YAML"),
        ("", "empty workload file"),
        (
            "kind: pipeline\nstages: 0\nmicrobatches: 1\nforward_time: 1\nbackward_time: 1\n",
            "stages: must be a positive integer",
        ),
    ],
)
def test_file_errors_name_the_file(tmp_path: Path, text: str, message: str) -> None:
    """Errors in a workload file start with the file's path."""
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=message) as info:
        load_workload(path)
    assert str(info.value).startswith(str(path))


def test_missing_file() -> None:
    """A missing workload file is a SpecError, not an OSError traceback."""
    with pytest.raises(SpecError, match="no such workload file"):
        load_workload("/nonexistent/w.yaml")
