"""MosaicML llm-foundry's published MPT training throughput, the rows ``plan_published.py``
compares with (a separate source from the Megatron-LM and Llama 3 rows).

Source: mosaicml/llm-foundry, ``scripts/train/benchmarking/README.md``, tables "H100 80GB
BF16", "H100 80GB FP8" and "A100 80GB with 1600 Gbps node-node interconnect (RoCE)". Every
run is PyTorch FSDP (``FULL_SHARD``) under Composer, tp = cp = pp = 1; ``amp_fp8`` is
Transformer Engine's fp8 linear layers. **Attention**: FlashAttention v1's Triton port
(:data:`ATTENTION`). The tables' runs are listed by ``sweep.sh``, which passes no
``--attn_impl``, and ``submit_benchmarks.py`` (llm-foundry commit a7c7567712c7, after PR #543
of October 2023 added the H100 tables) defaults it to ``triton`` and installs llm-foundry's
``v0.3.0`` branch with its ``gpu`` extra whatever ``sweep.sh``'s ``GIT_COMMIT`` says (its H100
fp8 runs add ``flash-attn==1.0.7`` and Transformer Engine v0.10); its earliest stored version
(commit 12a631913c78, still installing mosaicml/examples), older than the A100 70b rows'
table format, defaulted to ``triton`` too. ``attn_impl: triton`` is
``llmfoundry/models/layers/flash_attn_triton.py``, Tri Dao's Triton FlashAttention of the v1
generation (on ``triton_pre_mlir``; its docstring: "only been tested on A100").

**Selection rule**: every row of those three tables with an MPT of 1B parameters or more and
a sequence of at most 8192 (longer sequences run MPTs whose learned position embedding,
``s h`` parameters that the catalogue's MPT files neglect, exceeds 2% of the smaller models).
Nothing else is left out.

Each row: (model, sequence, GPUs, micro-batch, gradient-accumulation steps, published tokens
per second per GPU, activation checkpointing, FSDP mixed precision). The global batch is
``micro-batch x accumulation x GPUs``. Composer's ``DEFAULT`` FSDP mixed precision reduces
gradients in fp32, ``PURE`` in bf16.
"""

from __future__ import annotations

SOURCE = "mosaicml/llm-foundry scripts/train/benchmarking/README.md"
H100_BF16 = "llm-foundry H100 bf16"
H100_FP8 = "llm-foundry H100 fp8"
A100_BF16 = "llm-foundry A100 bf16"

Published = tuple[str, int, int, int, int, int, bool, str]
#: The attention of every row (``commsim plan --attention``): FlashAttention v1's generation.
ATTENTION = "fa1"

#: "H100 80GB BF16" (amp_bf16, DEFAULT)
H100_BF16_ROWS: tuple[Published, ...] = (
    ("70b", 2048, 64, 8, 4, 1039, True, "DEFAULT"),
    ("70b", 2048, 32, 2, 16, 882, True, "DEFAULT"),
    ("30b", 8192, 8, 1, 21, 1384, True, "DEFAULT"),
    ("30b", 4096, 8, 1, 21, 1802, True, "DEFAULT"),
    ("30b", 2048, 32, 14, 3, 2308, True, "DEFAULT"),
    ("30b", 2048, 16, 10, 3, 2263, True, "DEFAULT"),
    ("30b", 2048, 8, 3, 21, 2002, True, "DEFAULT"),
    ("30b", 1024, 8, 6, 21, 2084, True, "DEFAULT"),
    ("13b", 4096, 8, 10, 3, 4717, True, "DEFAULT"),
    ("13b", 2048, 64, 2, 1, 4800, False, "DEFAULT"),
    ("13b", 2048, 32, 2, 1, 4811, False, "DEFAULT"),
    ("13b", 2048, 16, 2, 1, 4767, False, "DEFAULT"),
    ("13b", 2048, 8, 2, 1, 4792, False, "DEFAULT"),
    ("13b", 1024, 8, 40, 3, 5502, True, "DEFAULT"),
    ("7b", 8192, 8, 8, 2, 6935, True, "DEFAULT"),
    ("7b", 4096, 8, 16, 2, 8611, True, "DEFAULT"),
    ("7b", 2048, 8, 6, 1, 10643, False, "DEFAULT"),
    ("7b", 1024, 8, 64, 2, 10203, True, "DEFAULT"),
    ("3b", 8192, 8, 3, 6, 16578, False, "DEFAULT"),
    ("3b", 4096, 8, 5, 6, 20964, False, "DEFAULT"),
    ("3b", 2048, 64, 6, 3, 22525, False, "DEFAULT"),
    ("3b", 2048, 32, 6, 3, 23021, False, "DEFAULT"),
    ("3b", 2048, 16, 10, 3, 24142, False, "DEFAULT"),
    ("3b", 1024, 8, 20, 6, 27046, False, "DEFAULT"),
    ("3b", 512, 8, 40, 6, 27965, False, "DEFAULT"),
    ("1b", 8192, 8, 3, 4, 29157, False, "DEFAULT"),
    ("1b", 4096, 8, 7, 4, 38535, False, "DEFAULT"),
    ("1b", 2048, 64, 20, 1, 44402, False, "DEFAULT"),
    ("1b", 2048, 32, 20, 1, 45130, False, "DEFAULT"),
    ("1b", 2048, 16, 20, 1, 46037, False, "DEFAULT"),
    ("1b", 2048, 8, 14, 1, 45455, False, "DEFAULT"),
    ("1b", 1024, 8, 18, 4, 48910, False, "DEFAULT"),
    ("1b", 512, 8, 56, 4, 52275, False, "DEFAULT"),
)

#: "H100 80GB FP8" (amp_fp8, DEFAULT)
H100_FP8_ROWS: tuple[Published, ...] = (
    ("3b", 8192, 8, 3, 6, 19146, False, "DEFAULT"),
    ("3b", 2048, 8, 10, 6, 30586, False, "DEFAULT"),
    ("3b", 512, 8, 40, 6, 36527, False, "DEFAULT"),
    ("1b", 8192, 8, 2, 4, 32010, False, "DEFAULT"),
    ("1b", 512, 8, 56, 4, 70315, False, "DEFAULT"),
)

#: "A100 80GB with 1600 Gbps node-node interconnect (RoCE)" (amp_bf16 DEFAULT; the 70b
#: rows bf16 PURE)
A100_BF16_ROWS: tuple[Published, ...] = (
    ("70b", 2048, 64, 8, 4, 410, True, "PURE"),
    ("70b", 2048, 32, 2, 16, 373, True, "PURE"),
    ("30b", 8192, 8, 1, 21, 574, True, "DEFAULT"),
    ("30b", 4096, 8, 1, 21, 814, True, "DEFAULT"),
    ("30b", 2048, 8, 3, 21, 916, True, "DEFAULT"),
    ("30b", 1024, 8, 6, 21, 946, True, "DEFAULT"),
    ("30b", 512, 8, 12, 21, 967, True, "DEFAULT"),
    ("13b", 8192, 8, 5, 3, 1795, True, "DEFAULT"),
    ("13b", 4096, 8, 10, 3, 2060, True, "DEFAULT"),
    ("13b", 2048, 8, 2, 3, 2262, False, "DEFAULT"),
    ("13b", 1024, 8, 40, 3, 2330, True, "DEFAULT"),
    ("7b", 8192, 8, 8, 2, 3206, True, "DEFAULT"),
    ("7b", 4096, 8, 16, 2, 3684, True, "DEFAULT"),
    ("7b", 2048, 8, 6, 2, 4641, False, "DEFAULT"),
    ("7b", 1024, 8, 64, 2, 4357, True, "DEFAULT"),
    ("3b", 8192, 8, 3, 6, 7695, False, "DEFAULT"),
    ("3b", 4096, 8, 5, 6, 9457, False, "DEFAULT"),
    ("3b", 2048, 8, 10, 2, 10811, False, "DEFAULT"),
    ("3b", 1024, 8, 20, 6, 11580, False, "DEFAULT"),
    ("3b", 512, 8, 40, 6, 12127, False, "DEFAULT"),
    ("1b", 8192, 8, 3, 4, 13814, False, "DEFAULT"),
    ("1b", 4096, 8, 7, 4, 17807, False, "DEFAULT"),
    ("1b", 2048, 8, 14, 4, 20513, False, "DEFAULT"),
    ("1b", 1024, 8, 18, 4, 22112, False, "DEFAULT"),
    ("1b", 512, 8, 56, 4, 23148, False, "DEFAULT"),
)

#: (source, preset family, precision, rows)
TABLES = (
    (H100_BF16, "dgx-h100", "bf16", H100_BF16_ROWS),
    (H100_FP8, "dgx-h100", "fp8", H100_FP8_ROWS),
    (A100_BF16, "dgx-a100", "bf16", A100_BF16_ROWS),
)
