"""A deliberately naive SimPy model of ring all-reduce: the baseline commsim's DES is judged by.

One process per rank, a ``simpy.Resource`` per link, an ``AllOf`` per step: the way a first SimPy
model of a collective is usually written. It times the same schedule as commsim's ring
all-reduce with ``--chunks 1`` on a ring topology (uncontended), so both must give the same time.
"""

from __future__ import annotations

import simpy


def ring_all_reduce_time(ranks: int, nbytes: int, latency_s: float, bandwidth_Bps: float) -> float:
    """Simulated time of a ring all-reduce: 2(p-1) steps, rank i sends one segment to i+1."""
    env = simpy.Environment()
    links = [simpy.Resource(env, capacity=1) for _ in range(ranks)]
    steps = 2 * (ranks - 1)
    arrived = [[env.event() for _ in range(steps)] for _ in range(ranks)]

    def segment_bytes(rank: int, step: int) -> int:
        index = (rank - step) % ranks if step < ranks - 1 else (rank + 1 - step) % ranks
        return (index + 1) * nbytes // ranks - index * nbytes // ranks

    def send(rank: int, step: int):  # type: ignore[no-untyped-def]
        with links[rank].request() as request:
            yield request
            yield env.timeout(latency_s + segment_bytes(rank, step) / bandwidth_Bps)
        arrived[(rank + 1) % ranks][step].succeed()

    def rank_process(rank: int):  # type: ignore[no-untyped-def]
        for step in range(steps):
            if step:
                yield arrived[rank][step - 1]  # forward only what has arrived
            yield simpy.AllOf(env, [env.process(send(rank, step))])

    for rank in range(ranks):
        env.process(rank_process(rank))
    env.run()
    return float(env.now)
