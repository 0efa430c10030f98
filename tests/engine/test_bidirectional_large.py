"""The bidirectional ring's closed form beyond MAX_LOOKUPS ranks, where only windows of pairs
are routed: its chains (broadcast, reduce) have one pair fewer than the ring, and the windows
must stay within them (they indexed past the last pair: an IndexError at 8,192 ranks)."""

from __future__ import annotations

import math

import pytest

from commsim.api import make_call
from commsim.engine.analytic import MAX_LOOKUPS, predict
from commsim.topology import load_topology


@pytest.mark.parametrize("collective", ["broadcast", "reduce", "all_reduce"])
def test_bidirectional_windows_beyond_max_lookups(collective: str) -> None:
    net = load_topology("dgx-h100x1024")
    assert net.ranks > MAX_LOOKUPS
    call = make_call(collective, net, "1GiB")
    time_s = predict(call, net, "ring_bidirectional")
    assert 0 < time_s < math.inf
    # half the buffer crosses at least one network hop of the slower direction
    assert time_s >= (2**30 // 2) / net.path_cost(0, 8)[1]
