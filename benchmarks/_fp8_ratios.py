"""fp8 against bf16 on the same machine and layout: what ``commsim plan`` predicts and what
was published, for ``plan_published.py``.

* llm-foundry (``_foundry_rows.py``): every fp8 row whose model, sequence, GPUs, micro-batch
  and batch have a bf16 row too; the published and predicted tokens per second of the two.
* torchtitan, ``docs/performance.md`` at commit eaea6f6a2fa940f03a10906be1df3489cf30af85
  (pytorch/torchtitan), Tables 1 and 3: Llama 3.1 8B, FSDP on 8 and 128 H100 (local batch 2,
  sequence 8192, selective activation checkpointing), "FSDP + torch.compile" 6,667 and 6,514
  tokens/s per GPU against "+ Float8" 8,532 and 8,380. Their H100 is a 96 GB HBM2e part at
  500 W whose peak is not published, so only the ratio is compared, on the dgx-h100 preset
  (H100 SXM5) with 96 GiB of memory: the assumption is that fp8 gains the same there. Their
  Float8 is torchao's (dynamic scaling), commsim's Transformer Engine's (delayed scaling).
* pytorch/ao ``torchao/float8/README.md``: one linear layer's forward and backward, fp8
  against bf16 on an H100 with the casting overhead, ``M, K, N`` = 1024, 2048, 1024: 0.80x;
  4096, 8192, 16384: 1.39x (a check of the fp8 linear layer alone, on the dgx-h100 preset).
"""

from __future__ import annotations

from dataclasses import replace

from commsim.plan import SearchSpace, plan
from commsim.plan.compute import _fwd_bwd
from commsim.plan.device import network_device
from commsim.plan.stack import PYTORCH_FSDP
from commsim.topology import load_topology

#: (GPUs, global batch, published bf16 and fp8 tokens/s per GPU)
TORCHTITAN = ((8, 16, 6667, 8532), (128, 256, 6514, 8380))


def torchtitan_ratios() -> list[tuple[int, float, float]]:
    """Per torchtitan table: (GPUs, published fp8/bf16, predicted fp8/bf16)."""
    space = SearchSpace(tp=(1,), cp=(1,), pp=(1,), micro_batch=(2,), data_parallel=("fsdp",),
                        recompute=("selective",))
    out = []
    for gpus, batch, bf16, fp8 in TORCHTITAN:
        steps = []
        for precision in ("bf16", "fp8"):
            res = plan("llama3-8b", f"dgx-h100x{gpus // 8}", global_batch=batch, seq=8192,
                       space=space, top=1, gpu_memory="96GiB",
                       stack=replace(PYTORCH_FSDP, precision=precision))
            steps.append(res.result.configs[0].record["step_time_s"])
        out.append((gpus, fp8 / bf16, steps[0] / steps[1]))
    return out


#: (M, K, N, published fp8/bf16 speed-up of the linear layer's forward and backward)
TORCHAO = ((1024, 2048, 1024, 0.80), (4096, 8192, 16384, 1.39))


def linear_ratios() -> list[tuple[int, int, int, float, float]]:
    """Per torchao shape: (M, K, N, published, predicted fp8/bf16 of one linear layer)."""
    device = network_device(load_topology("dgx-h100"))
    out = []
    for m, k, n, published in TORCHAO:
        bf16 = sum(_fwd_bwd(device, m, n, k))
        fp8 = sum(_fwd_bwd(device, m, n, k, "fp8"))
        out.append((m, k, n, published, bf16 / fp8))
    return out
