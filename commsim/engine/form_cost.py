"""What a closed form costs to evaluate, estimated before it runs.

The analytic engine's work grows with the pieces a call is cut into (``--chunks``), not with
its bytes: piece tables of ``chunks x ranks`` cells (the hierarchical forms compare every
piece of a part with every piece of its rails: ``chunks^2 x ranks``), and per-piece
recurrences stepped in Python (trees level by level, butterflies over every earlier write).
:func:`check_form_size` refuses in one line a call whose estimate exceeds
:data:`MAX_FORM_S` seconds or the memory budget, rather than running for minutes or failing
on an allocation. The algorithms' own default piece counts stay far below it.

The unit costs are upper figures of what ``/usr/bin/time`` showed on this project's 2-core
machine (2026-11): a table cell 30-80 ns and about 20-35 bytes held at once (ring on 4,096
ranks in 10,000 pieces: 2-5 s, 1.3 GB; hierarchical on 128 ranks in 1,000: 9.8 s), a
recurrence step 0.5-1.5 us, a butterfly step 4 us plus 10 ns per rank (Rabenseifner on 8
ranks in 100,000 pieces: 29 s; on 1,024 ranks in 1,000: 6.9 s).

>>> from commsim.algorithms.base import Call
>>> from commsim.collectives import Collective
>>> call = Call(collective=Collective.ALL_REDUCE, ranks=128, nbytes=2**30, chunks=10**8)
>>> seconds, nbytes = form_cost(call, "ring", 10**8)
>>> seconds > MAX_FORM_S
True
>>> form_cost(Call(collective=Collective.BROADCAST, ranks=65536, nbytes=2**30), "ring", 2048)
(0.004096, 0.0)
"""

from __future__ import annotations

from commsim.algorithms.base import Call
from commsim.budget import fits, memory_budget, over_budget
from commsim.errors import SpecError

#: Seconds one cell of a piece table costs (an upper figure; see the module docstring).
CELL_S = 1e-7
#: Bytes one cell of a piece table holds at once (the table, its cuts and its costs).
CELL_BYTES = 40
#: Seconds one step of a per-piece recurrence costs in Python.
STEP_S = 2e-6
#: The most seconds a closed form may be estimated to take; beyond it the call is refused.
MAX_FORM_S = 5.0

_BUTTERFLIES = ("recursive_doubling", "rabenseifner")
_TABLES = ("ring", "ring_bidirectional", "torus")
_TREES = ("binomial_tree", "double_binary_tree")
_IN_NETWORK = ("nvls", "collnet")


def form_cost(call: Call, name: str, chunks: int, hosts: int | None = None) -> tuple[float, float]:
    """(seconds, bytes): an upper estimate of evaluating ``call`` by ``name``'s closed form
    in ``chunks`` pieces, its ranks on ``hosts`` hosts (None: as many as ranks)."""
    p, c = call.ranks, chunks
    levels = max(1, (p - 1).bit_length())
    cells, steps = 0.0, 0.0
    if name in _TABLES:
        if call.collective.rooted:  # a chain: one recurrence over the pieces
            steps = float(c)
        else:
            cells = float(c) * p
    elif name in _TREES:
        cells, steps = float(c) * p, 4.0 * c * levels  # two trees, up and down
    elif name in _BUTTERFLIES:
        steps = _butterfly_steps(p, c)
    elif name in _IN_NETWORK:
        steps = 8.0 * c
    elif name == "hierarchical":
        cells = float(c) * c * p + float(c) * p
    elif name == "hierarchical_rabenseifner":
        cells, steps = float(c) * p, 2 * _butterfly_steps(hosts or p, c)
    return cells * CELL_S + steps * STEP_S, cells * CELL_BYTES


def _butterfly_steps(p: int, chunks: int) -> float:
    """A butterfly's recurrence: every piece of every message scans the earlier writes, each
    an array operation over the core ranks (costlier on many ranks)."""
    messages = 2 * max(1, (p - 1).bit_length()) + 2  # halving, doubling, fold and unfold
    return float(chunks) * messages * messages * (2 + p / 200)


def check_form_size(call: Call, name: str, chunks: int, hosts: int | None = None) -> None:
    """SpecError, in one line, when evaluating ``call`` by ``name``'s closed form in ``chunks``
    pieces (ranks on ``hosts`` hosts) would take more than :data:`MAX_FORM_S` or more memory
    than the budget."""
    seconds, nbytes = form_cost(call, name, chunks, hosts)
    fit = fits(nbytes)
    if seconds <= MAX_FORM_S and fit:
        return
    what = (f"the closed form of {name} {call.collective.value} on {call.ranks} ranks in "
            f"{chunks} pieces would take about {seconds:.3g} s")
    if not fit:
        what += f" and {over_budget(nbytes, memory_budget())}"
    else:
        what += f", more than the {MAX_FORM_S:g} s it is allowed"
    raise SpecError(f"{what}: use fewer --chunks or fewer --ranks")
