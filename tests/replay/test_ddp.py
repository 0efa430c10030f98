"""DDP: buckets as PyTorch's reducer forms them, all-reduces overlapping backward, no_sync.

The hand-computed timeline: 4 ranks on a fully connected network, two layers of 25 MiB of
gradients each, 25 MiB buckets, forward f and backward b per layer, ring all-reduce of time
``a = 2 (p - 1) (alpha + n / (p beta))``. Buckets (backward order): ``[layer 1], [layer 0]``.

* fast network (a < b): the first bucket's all-reduce runs ``[2f + b, 2f + b + a]`` under the
  second layer's backward; the second runs ``[2f + 2b, 2f + 2b + a]``; step ``2f + 2b + a``,
  exposed ``a``, overlap 1/2;
* slow network (a > b): the comm stream is still busy with the first when the second is queued,
  so they run back to back ``[2f + b, 2f + b + 2a]``; step ``2f + b + 2a``, exposed ``2a - b``.
"""

from __future__ import annotations

import pytest

from commsim import simulate
from commsim.replay import DdpSpec, Layer, replay
from commsim.replay.ddp import buckets

MiB = 2**20
F, B = 2.0**-10, 10 * 2.0**-10  # ~1 ms forward, ~10 ms backward per layer
ALPHA = 2.0**-20


def _ring_allreduce(p: int, nbytes: int, bandwidth: float) -> float:
    return 2 * (p - 1) * (ALPHA + nbytes / p / bandwidth)


def _ddp(**extra: object) -> dict[str, object]:
    return {
        "kind": "ddp",
        "layers": 2,
        "forward_time": f"{F!r}s",
        "backward_time": f"{B!r}s",
        "grad_bytes": "25MiB",
        "bucket_bytes": "25MiB",
        "algorithm": "ring",
        **extra,
    }


def _intervals(result, name_prefix: str) -> list[tuple[float, float]]:
    df = result.tasks()
    rows = df[df["name"].str.startswith(name_prefix)]
    return list(zip(rows["start_s"], rows["end_s"], strict=True))


def test_fast_network_hides_the_first_allreduce_under_backward(fully_connected) -> None:
    """a < b: first all-reduce under layer 0's backward, the second exposed; step 2f + 2b + a."""
    bw = 2.0**34
    a = _ring_allreduce(4, 25 * MiB, bw)
    assert a < B
    r = replay(_ddp(), fully_connected(4, bandwidth=bw))
    (s0, e0), (s1, e1) = _intervals(r, "allreduce")
    assert (s0, s1) == (2 * F + B, 2 * F + 2 * B)
    assert e0 - s0 == pytest.approx(a, rel=1e-12) and e1 - s1 == pytest.approx(a, rel=1e-12)
    assert r.step_time_s == pytest.approx(2 * F + 2 * B + a, rel=1e-12)
    assert r.metrics.compute_time_s == 2 * F + 2 * B
    assert r.metrics.comm_time_s == pytest.approx(2 * a, rel=1e-12)
    assert r.exposed_comm_s == pytest.approx(a, rel=1e-12)
    assert r.overlap_fraction == pytest.approx(0.5, rel=1e-12)


def test_slow_network_serializes_both_allreduces(fully_connected) -> None:
    """a > b: the second all-reduce waits for the first on the comm stream; step 2f + b + 2a."""
    bw = 2.0**30
    a = _ring_allreduce(4, 25 * MiB, bw)
    assert a > B
    r = replay(_ddp(), fully_connected(4, bandwidth=bw))
    (s0, e0), (s1, e1) = _intervals(r, "allreduce")
    assert s0 == 2 * F + B
    assert s1 == e0  # queued at 2f + 2b, but the stream is busy until the first ends
    assert e1 == pytest.approx(2 * F + B + 2 * a, rel=1e-12)
    assert r.step_time_s == pytest.approx(2 * F + B + 2 * a, rel=1e-12)
    assert r.exposed_comm_s == pytest.approx(2 * a - B, rel=1e-12)
    assert r.overlap_fraction == pytest.approx(B / (2 * a), rel=1e-12)


def test_allreduce_costs_what_commsim_run_says(fully_connected) -> None:
    """A lone bucket's all-reduce takes exactly the time simulate() gives the same collective."""
    net = fully_connected(4, bandwidth=2.0**34)
    r = replay(_ddp(), net)
    (s0, e0), _ = _intervals(r, "allreduce")
    assert e0 - s0 == pytest.approx(
        simulate("all_reduce", net, 25 * MiB, algorithm="ring").time_s, rel=1e-12
    )


def test_buckets_close_at_the_threshold_in_backward_order() -> None:
    """A bucket closes as soon as it holds bucket_bytes; the rest form the last bucket."""
    assert buckets([10, 10, 10, 10, 10], 25) == [[4, 3, 2], [1, 0]]
    assert buckets([30, 5, 5], 25) == [[2, 1, 0]]
    assert buckets([30, 5, 30], 25) == [[2], [1, 0]]


def test_smaller_first_bucket_like_pytorch(fully_connected) -> None:
    """first_bucket_bytes (PyTorch: 1 MiB) closes the first bucket early so comm starts sooner."""
    spec = {
        "kind": "ddp",
        "layers": 4,
        "forward_time": f"{F!r}s",
        "backward_time": f"{B!r}s",
        "grad_bytes": "1MiB",
        "bucket_bytes": "3MiB",
        "algorithm": "ring",
    }
    plain = replay(spec, fully_connected(4))
    early = replay({**spec, "first_bucket_bytes": "1MiB"}, fully_connected(4))
    assert [b["layers"] for b in plain.to_dict()["buckets"]] == [[3, 2, 1], [0]]
    assert [b["layers"] for b in early.to_dict()["buckets"]] == [[3], [2, 1, 0]]
    assert _intervals(early, "allreduce")[0][0] == 4 * F + B  # right after layer 3's backward


def test_gradient_accumulation_reduces_only_on_the_last_microstep(fully_connected) -> None:
    """accumulation_steps=3: three passes, all-reduces only in the last one (no_sync)."""
    bw = 2.0**34
    a = _ring_allreduce(4, 25 * MiB, bw)
    r = replay(_ddp(accumulation_steps=3), fully_connected(4, bandwidth=bw))
    starts = [s for s, _ in _intervals(r, "allreduce")]
    assert starts == [2 * (2 * F + 2 * B) + 2 * F + B, 3 * (2 * F + 2 * B)]
    assert r.metrics.compute_time_s == 3 * (2 * F + 2 * B)
    assert r.step_time_s == pytest.approx(3 * (2 * F + 2 * B) + a, rel=1e-12)


def test_optimizer_runs_after_every_allreduce(fully_connected) -> None:
    """optimizer_time is added after backward and the last all-reduce."""
    bw = 2.0**34
    a = _ring_allreduce(4, 25 * MiB, bw)
    r = replay(_ddp(optimizer_time=f"{F!r}s"), fully_connected(4, bandwidth=bw))
    assert r.step_time_s == pytest.approx(2 * F + 2 * B + a + F, rel=1e-12)


def test_layers_as_a_list(fully_connected) -> None:
    """layers may list each layer's times and gradient bytes (missing keys fall back to the top)."""
    r = replay(
        {
            "kind": "ddp",
            "backward_time": f"{B!r}s",
            "algorithm": "ring",
            "layers": [
                {"forward_time": f"{F!r}s", "grad_bytes": "1MiB"},
                {
                    "forward_time": f"{2 * F!r}s",
                    "grad_bytes": "30MiB",
                    "backward_time": f"{2 * B!r}s",
                },
            ],
        },
        fully_connected(4),
    )
    assert r.metrics.compute_time_s == 3 * F + 3 * B
    assert [b["nbytes"] for b in r.to_dict()["buckets"]] == [30 * MiB, MiB]


def test_spec_api_and_single_rank() -> None:
    """The spec can be built in Python; on one rank there is nothing to all-reduce."""
    spec = DdpSpec(
        layers=(Layer(forward_time_s=F, backward_time_s=B, grad_bytes=MiB),) * 2, algorithm="ring"
    )
    r = replay(spec, {"kind": "ring", "ranks": 1, "link": {"latency": "1us", "bandwidth": "1GB/s"}})
    assert r.step_time_s == 2 * F + 2 * B
    assert r.metrics.comm_time_s == 0.0 and r.overlap_fraction == 0.0
