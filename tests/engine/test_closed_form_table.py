"""The closed-form table of the engine layer and the algorithm registry name the same algorithms."""

from commsim.algorithms import ALGORITHMS
from commsim.engine.analytic import CLOSED_FORMS
from commsim.nccl import BASE_LATENCY_US


def test_every_algorithm_with_a_closed_form_has_one_in_the_table() -> None:
    """Each registered algorithm with ``closed_form=True`` has an entry in ``CLOSED_FORMS``,
    and each entry names a registered algorithm that claims a closed form (no stale rows)."""
    claimed = {name for name, algorithm in ALGORITHMS.items() if algorithm.closed_form}
    assert claimed == set(CLOSED_FORMS)


def test_nccl_families_are_the_nccl_model_s() -> None:
    """An algorithm's ``nccl_family`` is one of the families the NCCL model has latencies for."""
    families = {a.nccl_family for a in ALGORITHMS.values()} - {None}
    assert families <= set(BASE_LATENCY_US)
