"""The nccl-tests-like summary table ``commsim measure`` prints after writing its CSV."""

from __future__ import annotations

from collections.abc import Sequence

from commsim.measurements import Measurement


def format_table(rows: Sequence[Measurement[str]]) -> str:
    """An nccl-tests-like summary: a header naming backend, torch and host, then one line per
    row (times in microseconds, bandwidths in GB/s).

    >>> table = format_table([Measurement(collective="all_reduce", ranks=2, nbytes=1 << 20,
    ...                                   time_s=1e-3, backend="gloo")])
    >>> table.splitlines()[0]
    '# commsim measure: backend gloo'
    >>> table.splitlines()[-1].split()
    ['all_reduce', '2', '1048576', '1000.00', 'nan', 'nan', '1.05', '1.05']
    """
    if not rows:
        return ""
    first = rows[0]
    about = [f"backend {first.backend or '?'}"]
    if first.torch_version:
        about.append(f"torch {first.torch_version}")
    if first.host:
        about.append(f"host {first.host} ({first.cpus} cpus, {first.device})")
    lines = [
        f"# commsim measure: {', '.join(about)}",
        "#",
        f"# {'collective':>10}  {'ranks':>5}  {'size':>10}  {'time(us)':>11}  {'p10(us)':>11}  "
        f"{'p90(us)':>11}  {'algbw(GB/s)':>11}  {'busbw(GB/s)':>11}",
    ]
    for r in rows:
        lines.append(
            f"  {r.collective:>10}  {r.ranks:>5}  {r.nbytes:>10}  {r.time_s * 1e6:>11.2f}  "
            f"{r.time_p10_s * 1e6:>11.2f}  {r.time_p90_s * 1e6:>11.2f}  "
            f"{r.algbw_GBps:>11.2f}  {r.busbw_GBps:>11.2f}"
        )
    return "\n".join(lines)
