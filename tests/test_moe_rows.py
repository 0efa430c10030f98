"""The published mixture-of-experts rows of ``benchmarks/_moe_rows.py`` encode layouts that
exist: every row's layout fills its preset's GPUs, its batch divides into whole micro-batches
per data-parallel rank, its stage split holds the model's layers, and every row its selection
rule picks but commsim cannot evaluate names a source that has rows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from _moe_rows import (  # noqa: E402
    MOE_ROWS,
    MOE_ZOO,
    MOE_ZOO_LONG,
    OUT_OF_SCOPE,
    MoERow,
    zoo_flop_check,
)

from commsim.replay.stages import chunk_layers  # noqa: E402
from commsim.topology import load_topology  # noqa: E402


@pytest.mark.parametrize("row", MOE_ROWS, ids=[r.label for r in MOE_ROWS])
def test_row_layout_fills_its_preset(row: MoERow) -> None:
    cfg = row.config
    assert cfg.world == load_topology(row.preset).ranks
    assert row.global_batch % (cfg.micro_batch * cfg.dp) == 0
    assert (cfg.tp * cfg.cp * cfg.dp) % (cfg.etp * cfg.ep) == 0
    assert row.model.moe is not None and row.model.moe.experts % cfg.ep == 0
    split = cfg.split(row.model.layers)
    assert sum(split) == row.model.layers and len(split) == cfg.pp
    assert len(chunk_layers(split, cfg.chunks)) == cfg.pp  # raises on a split it cannot chunk
    assert row.published_step_s > 0


def test_qwen3_rows_keep_the_published_expert_layout() -> None:
    """The Qwen3 rows run as published, ETP 1 with the table's EP (32, 32, 8, 8, 8) under
    TP 2 or 4."""
    rows = [r for r in MOE_ROWS if r.source == MOE_ZOO]
    assert [(r.config.tp, r.config.etp, r.config.ep) for r in rows] == [
        (2, 1, 32), (2, 1, 32), (2, 1, 8), (2, 1, 8), (4, 1, 8)]
    assert all(r.preset == "dgx-h100x32" and r.model.name == "qwen3-235b-a22b" for r in rows)


def test_the_long_context_rows_count_flops_as_the_short_table_does() -> None:
    """The long-context table's TFLOP/s become step times under the count the short table's
    own step times pin: Megatron-LM's with causal attention, within 1% of every row's
    TFLOP/s x step time (both rounded in the table), where the full-attention count is 12%
    off; the rows keep the command's layout (TP 4, PP 8 x VPP 4, EP 8 at ETP 1, CP over the
    sequence, MoE recompute)."""
    implied, causal, full = zoo_flop_check()
    assert all(abs(x / causal - 1) < 0.01 for x in implied)
    assert all(full / x - 1 > 0.1 for x in implied)
    rows = [r for r in MOE_ROWS if r.source == MOE_ZOO_LONG]
    assert [(r.model.seq, r.config.cp, r.config.dp) for r in rows] == [
        (16384, 1, 8), (32768, 2, 4), (65536, 4, 2), (131072, 8, 1)]
    assert all((r.config.tp, r.config.pp, r.config.chunks, r.config.ep, r.config.etp,
                r.config.recompute, r.global_batch, r.stack.dispatcher)
               == (4, 8, 4, 8, 1, "moe", 256, "deepep") for r in rows)


def test_out_of_scope_rows_name_a_source_with_rows() -> None:
    sources = {r.source for r in MOE_ROWS}
    assert OUT_OF_SCOPE and all(source in sources for source, _, _ in OUT_OF_SCOPE)
