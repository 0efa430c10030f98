"""Published mixture-of-experts training throughput, the rows ``plan_published.py --moe`` compares
by step time: the published throughput turned into the seconds of one step of the published
batch, and the layout each source states.

**Selection rule.** Every published MoE training figure found that states the layout it ran
(GPUs and their kind; TP, EP, PP with its virtual stages; sequence and global batch; the
micro-batch where stated, else 1, said in the row's ``assumes``) and a step time, or a throughput
whose FLOP or token count is pinned down by the source, on GPUs a shipped preset models (H100,
H800, A100):

* NVIDIA/Megatron-LM ``megatron/core/transformer/moe/README.md``: its one throughput figure
  (Mixtral 8x7B, 468 TFLOP/s on its "Reference Best Parallel Mapping", 64 H100);
* DeepSeek-AI 2024, "DeepSeek-V3 Technical Report": 180K H800 GPU-hours per trillion tokens on
  its stated 2,048 H800 layout;
* yanring/Megatron-MoE-ModelZoo (the Megatron-Core MoE team's recipes),
  ``best_practice/qwen3/readme.md``, table "Performance Results / H100" (256 H100, NVLink 4,
  InfiniBand 8 x 50 GB/s per host): every row, each with TP, CP, EP, PP, ETP, VPP, DP, MBS,
  GBS, recompute and step time. Its Qwen3-Next-80B-A3B row is out of scope: that model's Gated
  DeltaNet linear-attention layers are not modelled (:data:`OUT_OF_SCOPE`);
* the same file's "Long Context" table for H100 (256 H100, Qwen3-235B-A22B, DeepEP, bf16; TP,
  CP, PP 8, VPP 4, EP 8, GBS 256 and the recompute in its command): its four "forced balance"
  TFLOP/s (the dropless ones route unevenly by an amount not stated: out of scope). The table
  names no FLOP count; the short table above pins it: its five rows' TFLOP/s x step time give
  147.3-148.2 GFLOP per token, Megatron-LM's count with causal attention
  (:func:`zoo_flops`) 148.0, the 2024 count with full ``s x s`` attention 166.9
  (:func:`zoo_flop_check`, printed by the benchmark).

Left out by the rule, and why (docs/planning.md lists them): the same file's GB200/GB300
tables (no preset); the TFLOP/s in the ModelZoo's run scripts' comments (Mixtral
8x22B "around 455TFLOPS", Qwen3-235B "320 TFLOPS": approximate figures beside a command, not a
table of runs, under a FLOP count whose version is not stated); the MoE Parallel Folding paper
(arXiv 2504.14960, Table 1: the layout of each row is "found by tuning", not stated); the
DeepSeek-V2 report (172.8K GPU-hours per trillion tokens, PP 16, EP 8, ZeRO-1, but no GPU
count).

The Qwen3 rows run Megatron-Core's expert tensor parallelism of 1 under attention TP ``t``
(MoE Parallel Folding, ``--expert-tensor-parallel-size 1``), evaluated as published: ETP 1 x
the published EP over a stage's ``t x dp`` ranks (:mod:`commsim.plan.config`), the EP groups
spanning the attention's TP ranks, no expert TP collective.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from commsim.plan.config import PlanConfig, rank_order
from commsim.plan.models import ModelSpec, catalogue_model
from commsim.plan.stack import DEFAULT, Stack


@dataclass(frozen=True)
class MoERow:
    """A published mixture-of-experts run: layout, batch, its step in seconds (from the
    source's own throughput figure) and what commsim assumes for it."""

    source: str
    label: str
    model: ModelSpec
    gpu: str
    preset: str
    config: PlanConfig
    global_batch: int
    published: str
    published_step_s: float
    assumes: str
    stack: Stack = DEFAULT


MCORE_MOE = "Megatron-Core MoE README (H100)"
DEEPSEEK_V3 = "DeepSeek-V3 report 2024 (H800)"
MOE_ZOO = "Megatron-MoE-ModelZoo Qwen3 (H100)"
MOE_ZOO_LONG = "Megatron-MoE-ModelZoo Qwen3 long context (H100)"

#: Rows the rule selects that commsim cannot evaluate: (source, row, why).
OUT_OF_SCOPE = (
    (MOE_ZOO, "Qwen3-Next-80B-A3B, 128 H100, TP1 EP32 PP4 VPP3, 2.2 s",
     "Gated DeltaNet linear attention (3 of 4 layers) and gated attention not modelled"),
    (MOE_ZOO_LONG, "the four dropless TFLOP/s (237, 277, 320, 357)",
     "uneven routing by an amount the table does not state"),
)


def _megatron_flops(m: ModelSpec, batch: int, causal: bool = False) -> float:
    """Megatron-LM's FLOPs of a step (2024 form; ``f`` the expert's size, ``k`` top-k), or
    with causal attention (half the ``s x s`` scores: its later form)."""
    assert m.moe is not None
    h, s, lay = m.hidden, m.seq, m.layers
    attn = (1 + m.kv_heads / m.heads + s / (2 * h if causal else h)) * m.q_hidden / h
    mlp = m.moe.expert_ffn_hidden / h * m.moe.top_k * (1.5 if m.mlp == "swiglu" else 1.0)
    return 12 * batch * s * lay * h * h * (attn + mlp + m.vocab / (2 * lay * h))


def zoo_flops(m: ModelSpec, batch: int) -> float:
    """The FLOPs of a step the ModelZoo's Qwen3 tables count (Megatron-LM's, causal)."""
    return _megatron_flops(m, batch, causal=True)


#: The ModelZoo's short H100 table: (step seconds, TFLOP/s per GPU) of its five
#: Qwen3-235B rows, 256 GPUs, 2048 x 4096 tokens a step.
ZOO_STEPS_AND_TFLOPS = ((19.7, 245), (17.6, 276), (17.6, 276), (24.2, 200), (29.0, 167))


def zoo_flop_check() -> tuple[list[float], float, float]:
    """(GFLOP per token each short-table row implies, the causal count's, the full-attention
    count's) for Qwen3-235B at sequence 4096."""
    model = catalogue_model("qwen3-235b-a22b")
    tokens = 2048 * model.seq
    implied = [tf * 1e12 * 256 * step / tokens / 1e9 for step, tf in ZOO_STEPS_AND_TFLOPS]
    return (implied, zoo_flops(model, 2048) / tokens / 1e9,
            _megatron_flops(model, 2048) / tokens / 1e9)


def _mixtral() -> MoERow:
    model = replace(catalogue_model("mixtral-8x7b"), seq=4096)
    cfg = PlanConfig(tp=1, cp=1, pp=4, dp=16, micro_batch=1, schedule="interleaved", chunks=8,
                     data_parallel="zero1", recompute="none", ep=8,
                     order=rank_order(has_experts=True))
    step = _megatron_flops(model, 256) / (468e12 * cfg.world)
    return MoERow(MCORE_MOE, "Mixtral 8x7B", model, "H100", "dgx-h100x8", cfg, 256,
                  "468 TFLOP/s/GPU", step,
                  "VP 8 read as 8 chunks of one layer; MCore v0.9's 468 on v0.8's mapping; even "
                  "routing; no recompute", Stack(moe_overlap="none"))


def _deepseek_v3() -> MoERow:
    model = catalogue_model("deepseek-v3")
    cfg = PlanConfig(tp=1, cp=1, pp=16, dp=128, micro_batch=1, schedule="1f1b", chunks=1,
                     data_parallel="zero1", recompute="none", ep=64,
                     stage_layers=(3,) + (4,) * 14 + (2,), order=rank_order(has_experts=True))
    tokens = 15360 * model.seq
    step = tokens * 180e3 * 3600 / 1e12 / cfg.world  # 180K GPU-hours per 1e12 tokens
    return MoERow(DEEPSEEK_V3, "DeepSeek-V3", model, "H800", "hgx-h800x256", cfg, 15360,
                  "180K GPU-h/T tokens", step,
                  "micro-batch 1 and split 3,4*14,2 not stated; routing even within a token's 4 "
                  "of 8 groups (one per host); DeepEP's kernels for the report's dispatch; no "
                  "MTP module; no recompute of the RMSNorms and MLA up-projections; GPU-hours "
                  "as step time",
                  Stack(precision="fp8", moe_overlap="dualpipe", dispatcher="deepep"))


def _qwen3_stages(pp: int, vpp: int) -> tuple[int, ...]:
    """Qwen3-235B's 94 layers over ``pp`` stages of ``vpp`` chunks as the ModelZoo's model
    file splits them (``--account-for-embedding-in-pipeline-split`` and
    ``--account-for-loss-in-pipeline-split``: 96 slots, the first and the last stage one layer
    short); empty without pipelining."""
    if pp == 1:
        return ()
    per = 96 // pp
    assert per * pp == 96 and per % vpp == 0, (pp, vpp)
    return (per - 1,) + (per,) * (pp - 2) + (per - 1,)


def _qwen3(tp: int, ep: int, pp: int, vpp: int, dp: int, mbs: int, recompute: str,
           step_s: float, note: str, *, dispatcher: str = "deepep",
           overlap: str = "none") -> MoERow:
    """A row of the ModelZoo's Qwen3 H100 table: Qwen3-235B-A22B, 256 H100, sequence 4096,
    global batch 2048, CP 1, ETP 1 (``ep`` the published EP, over ETP 1), bf16; the
    distributed optimizer with overlapped gradient reduction (``zero1``) unless FSDP is on
    (``mbs`` 4 row). ``recompute``: the table's column (``norm, act``: the layer norms' and
    the MoE activation's, not charged; ``full``); ``overlap``: ``ep-overlap`` where the
    table's note says "+1f1b overlap" (Megatron-Core's combined 1F1B); ``dispatcher``: the
    table's (``deepep``: its DeepEP rows, ``alltoall``: its "A2A" row)."""
    model = catalogue_model("qwen3-235b-a22b")
    cfg = PlanConfig(tp=tp, cp=1, pp=pp, dp=dp, micro_batch=mbs,
                     schedule="interleaved" if vpp > 1 else "1f1b", chunks=vpp,
                     data_parallel="fsdp" if pp == 1 else "zero1",
                     recompute="full" if recompute == "full" else "none", ep=ep, etp=1,
                     stage_layers=_qwen3_stages(pp, vpp), order=rank_order(has_experts=True))
    kept = "; norm and MoE-activation recompute not charged" if recompute == "norm, act" else ""
    return MoERow(MOE_ZOO, f"Qwen3-235B-A22B {note}", model, "H100", "dgx-h100x32", cfg, 2048,
                  f"{step_s} s/step", step_s,
                  f"even routing (balance not stated){kept}",
                  Stack(moe_overlap=overlap, dispatcher=dispatcher))


def _qwen3_long(seq: int, cp: int, tflops: int) -> MoERow:
    """A "forced balance" row of the ModelZoo's H100 long-context table: Qwen3-235B-A22B on
    256 H100, TP 4, PP 8, VPP 4, EP 8 (ETP 1, the model file's), global batch 256, DeepEP, no
    all-to-all overlap, recompute of the layer norms and the MoE layers (``moe``; the norms'
    not charged), the step from its TFLOP/s under :func:`zoo_flops`."""
    model = replace(catalogue_model("qwen3-235b-a22b"), seq=seq)
    cfg = PlanConfig(tp=4, cp=cp, pp=8, dp=256 // (4 * cp * 8), micro_batch=1,
                     schedule="interleaved", chunks=4, data_parallel="zero1", recompute="moe",
                     ep=8, etp=1, stage_layers=_qwen3_stages(8, 4),
                     order=rank_order(has_experts=True))
    step = zoo_flops(model, 256) / (tflops * 1e12 * cfg.world)
    return MoERow(MOE_ZOO_LONG, f"Qwen3-235B-A22B seq {seq // 1024}k CP {cp}", model, "H100",
                  "dgx-h100x32", cfg, 256, f"{tflops} TFLOP/s/GPU", step,
                  "micro-batch 1 not stated; forced balance as even routing; norm recompute "
                  "not charged; TFLOP/s under the causal count the short table pins",
                  Stack(dispatcher="deepep"))


MOE_ROWS = (
    _mixtral(),
    _deepseek_v3(),
    _qwen3(2, 32, 8, 4, 16, 1, "norm, act", 19.7, "EP32 cross-node"),
    _qwen3(2, 32, 8, 4, 16, 1, "norm, act", 17.6, "EP32 cross-node, 1F1B overlap",
           overlap="ep-overlap"),
    _qwen3(2, 8, 1, 1, 128, 4, "full", 17.6, "EP8 FSDP"),
    _qwen3(2, 8, 32, 3, 4, 1, "norm, act", 24.2, "EP8 PP32", dispatcher="alltoall"),
    _qwen3(4, 8, 8, 4, 8, 1, "", 29.0, "EP8 TP4"),
    _qwen3_long(16384, 1, 295),
    _qwen3_long(32768, 2, 335),
    _qwen3_long(65536, 4, 368),
    _qwen3_long(131072, 8, 389),
)
