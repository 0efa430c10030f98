"""How many ranks a command line in a log launched an nccl-tests binary with.

nccl-tests runs ``processes x threads x GPUs per thread`` ranks: the launcher's process count
(``mpirun -np 16``, ``srun -n 16`` or ``-N 2 --ntasks-per-node 8``; one process without a
launcher) times the test's own ``-t`` and ``-g`` (nccl-tests' README, "Usage"). A log that
prints the command it ran (a job script's echo, ``set -x``'s ``+ mpirun ...``, a shell prompt)
says so; the parser takes the count where the table's busbw/algbw allows it.
"""

from __future__ import annotations

import re

#: A test binary on a command line (``./build/all_reduce_perf``, ``all_gather_perf_mpi``).
_BINARY = re.compile(r"(?:^|[\s/=])([a-z_]+_perf(?:_mpi)?)(?=\s|$)")
_LAUNCHERS = frozenset({"mpirun", "mpiexec", "orterun", "prterun", "srun", "mpirun.mpich",
                        "mpirun.openmpi", "mpiexec.hydra"})
_COUNT = {"-np", "--np", "-n", "--ntasks"}
_PER_NODE = {"--ntasks-per-node"}
_NODES = {"-N", "--nodes"}
_GPUS = {"-g", "--ngpus"}
_THREADS = {"-t", "--nthreads"}


def _options(tokens: list[str]) -> dict[str, str]:
    """``-x 1``, ``--x=1`` and ``--x 1`` pairs, the last of each name kept."""
    found: dict[str, str] = {}
    for i, token in enumerate(tokens):
        if not token.startswith("-"):
            continue
        name, eq, value = token.partition("=")
        if not eq:
            value = tokens[i + 1] if i + 1 < len(tokens) else ""
        found[name] = value
    return found


def _integer(options: dict[str, str], names: set[str]) -> int | None:
    values = [options[n] for n in names if n in options]
    if len(values) != 1 or not values[0].isdigit() or int(values[0]) < 1:
        return None
    return int(values[0])


def launched_ranks(line: str) -> int | None:
    """The ranks a command line runs its nccl-tests binary on, or None if it does not say.

    >>> launched_ranks("mpirun -np 16 -x NCCL_DEBUG=INFO ./build/all_reduce_perf -b 8 -g 1 -n 50")
    16
    >>> launched_ranks("srun -N 2 --ntasks-per-node=4 all_gather_perf -b 8 -e 1G -g 2")
    16
    >>> launched_ranks("./build/all_reduce_perf -b 8 -e 128M -f 2 -g 8")
    8
    >>> launched_ranks("mpirun --hostfile hosts ./all_reduce_perf -g 1") is None  # hosts' slots
    True
    """
    match = _BINARY.search(line)
    if match is None:
        return None
    before, after = line[: match.start(1)].split(), line[match.end(1) :].split()
    test = _options(after)
    gpus = _integer(test, _GPUS) if _GPUS & test.keys() else 1
    threads = _integer(test, _THREADS) if _THREADS & test.keys() else 1
    launcher = [t for t in before if t.rsplit("/", 1)[-1] in _LAUNCHERS]
    if not after and not launcher:
        return None  # a name in prose ("The test is all_reduce_perf"), not a command
    if launcher:
        launch = _options(before[before.index(launcher[0]) + 1 :])
        processes = _integer(launch, _COUNT)
        if processes is None and "srun" in launcher[0]:
            nodes, per_node = _integer(launch, _NODES), _integer(launch, _PER_NODE)
            processes = nodes * per_node if nodes and per_node else None
    else:
        processes = 1
    if processes is None or gpus is None or threads is None:
        return None
    return processes * threads * gpus
