"""All-to-all: every schedule proven by the checker (powers of two and not, 1 to 512 ranks),
the checker's own refusals, DES == closed form where nothing is shared, nccl-tests' busbw
factor, all-to-allv equal to all-to-all when every size is, and NCCL's choice."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from commsim import simulate
from commsim.algorithms import build_schedule
from commsim.algorithms.alltoall_sizes import matrix_counts, skewed_counts
from commsim.algorithms.base import Call
from commsim.checker import check
from commsim.cli import main
from commsim.collectives import Collective, parse_collective
from commsim.errors import ScheduleError, SpecError
from commsim.schedule import Columns, Schedule

A2A = Collective.ALL_TO_ALL
FLAT = ("pairwise", "bruck", "all_pairs")


def _hosts(p: int, per: int) -> tuple[int, ...]:
    return tuple(r // per for r in range(p))


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8, 12, 31, 64, 100])
def test_flat_schedules_pass_the_checker(p: int) -> None:
    for name in FLAT:
        for n in (0, 1, 8 * p, 8 * p + 5):
            check(build_schedule(Call(collective=A2A, ranks=p, nbytes=n), name))
        check(build_schedule(Call(collective=A2A, ranks=p, nbytes=8 * p + 3, chunks=3), name))


@pytest.mark.parametrize(("p", "per"), [(4, 2), (12, 4), (24, 8), (96, 8)])
def test_host_schedules_pass_the_checker(p: int, per: int) -> None:
    for name in ("pxn", "hierarchical"):
        for n in (8 * p, 8 * p + 3, 1 << 20):
            check(build_schedule(Call(collective=A2A, ranks=p, nbytes=n, hosts=_hosts(p, per)),
                                 name))


@pytest.mark.parametrize("dims", [(2, 3), (4, 4, 4), (3, 1, 5), (16, 16)])
def test_torus_schedules_pass_the_checker(dims: tuple[int, ...]) -> None:
    p = int(np.prod(dims))
    for n in (4 * p, 4 * p + 7):
        check(build_schedule(Call(collective=A2A, ranks=p, nbytes=n, torus_dims=dims), "torus"))


def test_512_ranks_pass_the_checker() -> None:
    """The largest count, once per kind of schedule (about 0.3 million transfers each)."""
    p = 512
    check(build_schedule(Call(collective=A2A, ranks=p, nbytes=64 * p), "pairwise"))
    check(build_schedule(Call(collective=A2A, ranks=p, nbytes=64 * p + 9,
                              hosts=_hosts(p, 8)), "pxn"))
    check(build_schedule(Call(collective=A2A, ranks=p, nbytes=64 * p,
                              torus_dims=(8, 8, 8)), "torus"))


def test_uneven_matrix_passes_the_checker() -> None:
    rng = np.random.default_rng(7)
    p = 12
    sizes = rng.integers(0, 50, size=(p, p))
    counts = tuple(int(x) for x in sizes.ravel())
    n = int(sizes.sum(axis=1).max())
    for name in (*FLAT, "pxn", "hierarchical"):
        call = Call(collective=A2A, ranks=p, nbytes=n, counts=counts, hosts=_hosts(p, 4))
        check(build_schedule(call, name))


def _broken(schedule: Schedule, cols: Columns) -> Schedule:
    return Schedule.of_columns(A2A, "broken", schedule.ranks, schedule.nbytes, 0, 1, cols)


def test_the_checker_refuses_broken_all_to_alls() -> None:
    bruck = build_schedule(Call(collective=A2A, ranks=8, nbytes=64), "bruck")
    c = bruck.columns
    no_deps = replace(c, dep_ptr=np.zeros_like(c.dep_ptr), dep_idx=c.dep_idx[:0], level=None)
    with pytest.raises(ScheduleError, match="forwards rank .*missing dependency"):
        check(_broken(bruck, no_deps))
    direct = build_schedule(Call(collective=A2A, ranks=4, nbytes=64), "all_pairs").columns
    keep = np.arange(len(direct)) != 2
    dropped = Columns(direct.src[keep], direct.dst[keep], direct.offset[keep],
                      direct.nbytes[keep], direct.reduce[keep],
                      np.zeros(int(keep.sum()) + 1, dtype=np.int64), direct.dep_idx[:0])
    with pytest.raises(ScheduleError, match=r"all_to_all: rank \d holds 0 of the \d+ bytes"):
        check(_broken(bruck, dropped))
    with pytest.raises(ScheduleError, match="never reduces"):
        check(_broken(bruck, replace(direct, reduce=np.ones(len(direct), dtype=bool))))
    twice = Columns(np.r_[direct.src, direct.src[:1]], np.r_[direct.dst, direct.dst[:1]],
                    np.r_[direct.offset, direct.offset[:1]], np.r_[direct.nbytes,
                                                                   direct.nbytes[:1]],
                    np.zeros(len(direct) + 1, dtype=bool),
                    np.zeros(len(direct) + 2, dtype=np.int64), direct.dep_idx[:0])
    with pytest.raises(ScheduleError, match="already receives"):
        check(_broken(bruck, twice))


def _switch(p: int) -> dict[str, object]:
    return {"kind": "switch", "ranks": p, "link": {"latency": "1us", "bandwidth": "100GB/s"}}


@pytest.mark.parametrize("p", [2, 3, 5, 8, 16])
def test_des_equals_closed_form_where_nothing_is_shared(p: int) -> None:
    """On a switch (alike pairs), equal blocks: pairwise shares no link at all; bruck's and
    all_pairs' flows share only their own links evenly, which the closed forms count."""
    for name in FLAT:
        for n in (p * 1024, p * (1 << 20)):
            des = simulate("all_to_all", _switch(p), n, algorithm=name).time_s
            ana = simulate("all_to_all", _switch(p), n, algorithm=name, engine="analytic").time_s
            assert des == pytest.approx(ana, rel=1e-9), (name, n)


def test_des_equals_closed_form_by_rails_and_on_a_torus() -> None:
    for topology, name in (("dgx-h100x4", "hierarchical"), ("dgx-h100x2", "all_pairs")):
        kw = {"algorithm": name, "protocol": "none"}
        des = simulate("all_to_all", topology, "1MiB", **kw).time_s  # type: ignore[arg-type]
        ana = simulate("all_to_all", topology, "1MiB", engine="analytic", **kw).time_s  # type: ignore[arg-type]
        assert des == pytest.approx(ana, rel=1e-9)


def test_busbw_follows_nccl_tests() -> None:
    assert parse_collective("alltoall") is A2A
    assert parse_collective("all-to-all") is A2A
    assert A2A.busbw_factor(8) == 7 / 8
    r = simulate("all_to_all", _switch(8), "1MiB", algorithm="pairwise")
    assert r.algbw_Bps == pytest.approx(2**20 / r.time_s)
    assert r.busbw_Bps == pytest.approx(r.algbw_Bps * 7 / 8)


@pytest.mark.parametrize("name", [*FLAT, "pxn", "hierarchical", "auto"])
def test_equal_all_to_allv_is_all_to_all(name: str) -> None:
    p, each = 16, 4096
    kw = {"algorithm": name, "protocol": "none"}
    even = simulate("all_to_all", "dgx-h100x2", p * each, **kw)  # type: ignore[arg-type]
    v = simulate("all_to_all", "dgx-h100x2", None, matrix=[[each] * p] * p, **kw)  # type: ignore[arg-type]
    assert (v.algorithm, v.nbytes, v.time_s) == (even.algorithm, even.nbytes, even.time_s)
    assert v.transfers().equals(even.transfers())
    skew0 = simulate("all_to_all", "dgx-h100x2", p * each, skew=0.0, **kw)  # type: ignore[arg-type]
    assert skew0.time_s == even.time_s


def test_skew_makes_the_hot_rank_wait() -> None:
    counts = skewed_counts(8, 8000, 1.0)
    assert counts[:8] == (2000, 857, 857, 857, 857, 857, 857, 858)
    assert all(sum(counts[s * 8:(s + 1) * 8]) == 8000 for s in range(8))
    even = simulate("all_to_all", _switch(8), 8000 * 1024, algorithm="all_pairs").time_s
    hot = simulate("all_to_all", _switch(8), 8000 * 1024, algorithm="all_pairs", skew=1.0).time_s
    assert hot > 1.5 * even
    with pytest.raises(SpecError, match="at most 7"):
        skewed_counts(8, 100, 7.5)


def test_matrix_files(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text("# bytes\n0,1KiB\n3,0\n", encoding="utf-8")
    (tmp_path / "m.yaml").write_text("- [0, 1024]\n- [3, 0]\n", encoding="utf-8")
    assert matrix_counts(tmp_path / "m.csv", 2) == (0, 1024, 3, 0)
    assert matrix_counts(str(tmp_path / "m.yaml"), 2) == (0, 1024, 3, 0)
    with pytest.raises(SpecError, match="is 3 x 3"):
        matrix_counts(tmp_path / "m.csv", 3)


def test_nccl_chooses_pxn_across_hosts_and_ll_for_small_blocks() -> None:
    assert simulate("all_to_all", "dgx-h100x4", "1MiB").label == "pxn/Simple"
    assert simulate("all_to_all", "dgx-h100x4", "64KiB").label == "pxn/LL"
    assert simulate("all_to_all", "dgx-h100", "1MiB").label == "all_pairs/Simple"


def _cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_outputs_do_not_change_the_numbers(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "all_to_all", "-t", "dgx-h100x4", "-s", "1MiB", "--json"]
    code, plain, _ = _cli(capsys, base)
    assert code == 0
    x, t = tmp_path / "x.csv", tmp_path / "t.json"
    code, with_files, _ = _cli(capsys, [*base, "--transfers", str(x), "--trace", str(t)])
    assert code == 0 and json.loads(with_files) == json.loads(plain)
    rows = x.read_text(encoding="utf-8").splitlines()
    assert rows[0] == "src,dst,start_s,end_s,nbytes,offset,op"
    ends = [float(row.split(",")[3]) for row in rows[1:]]
    assert max(ends) == pytest.approx(json.loads(plain)["time_s"])
    assert json.loads(t.read_text(encoding="utf-8"))


@pytest.mark.parametrize("body", ["1,2\n3\n", "a,b\nc,d\n", "-1,0\n0,0\n", ""])
def test_bad_matrix_is_one_line_exit_2(body: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.csv"
    path.write_text(body, encoding="utf-8")
    code, _, err = _cli(capsys, ["run", "alltoall", "-t", "dgx-h100", "--ranks", "2",
                                 "--matrix", str(path)])
    assert code == 2 and err.count("\n") == 1 and str(path) in err or "--matrix" in err
