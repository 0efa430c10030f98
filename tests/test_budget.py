"""The memory budget (commsim.budget) and run's --max-memory: a simulation that would not fit
is refused before it is built, a symmetric one is had from one representative instead."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from commsim import budget
from commsim.budget import (
    DEFAULT_FRACTION,
    SMALL_BYTES,
    available_bytes,
    budget_source,
    fits,
    limited,
    memory_budget,
)
from commsim.cli import main


def _stdout(argv: list[str]) -> str:
    """``commsim ARGV``'s output from a fresh process (no memo shared with other runs)."""
    return subprocess.run([sys.executable, "-m", "commsim", *argv], capture_output=True,
                          text=True, timeout=120, check=True).stdout


def test_default_budget_is_a_fraction_of_the_available_memory() -> None:
    assert 0 < memory_budget() <= available_bytes()
    assert f"{DEFAULT_FRACTION:.0%}" in budget_source()


def test_limited_sets_and_restores_the_budget() -> None:
    before = memory_budget() > 0
    with limited(12345):
        assert memory_budget() == 12345 and budget_source() == "--max-memory"
        with limited(None):
            assert memory_budget() != 12345
    assert (memory_budget() > 0) == before and budget_source() != "--max-memory"


@pytest.mark.parametrize(("value", "needle"), [("0B", "must be positive"),
                                                ("-1GiB", "negative"), ("lots", "lots")])
def test_bad_max_memory_is_one_line(value: str, needle: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "all_reduce", "-t", "dgx-h100", "-s", "1MiB", "--max-memory", value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-memory" in err and needle in err


def test_over_budget_symmetric_ring_takes_the_exact_path() -> None:
    """The ring of one dgx-h100 is symmetric: under a 1 KiB budget it is not simulated but had
    from one representative, with the same time the DES gives."""
    base = ["run", "all_reduce", "-t", "dgx-h100", "-s", "1MiB", "-a", "ring", "--protocol",
            "Simple", "--json"]
    full = _stdout(base)
    fast = _stdout([*base, "--max-memory", "1KiB"])
    assert '"note": "symmetric ring' in fast and '"note"' not in full
    assert json.loads(fast)["time_s"] == pytest.approx(json.loads(full)["time_s"], rel=1e-9)


def test_over_budget_contended_ring_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """A ring across hosts is not symmetric: over the budget, one line and exit 2; within a
    larger --max-memory it runs."""
    base = ["run", "all_gather", "-t", "dgx-h100x2", "-s", "1MiB", "-a", "ring", "--protocol",
            "none"]
    assert main([*base, "--max-memory", "1KiB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1.0 kB budget (--max-memory)" in err
    assert main([*base, "--max-memory", "1GiB"]) == 0


def test_replay_takes_max_memory_too(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """``replay`` runs the DES in this process: --max-memory bounds it the same way."""
    workload = tmp_path / "ddp.yaml"
    workload.write_text("kind: ddp\nlayers: 2\nforward_time: 1ms\nbackward_time: 2ms\n"
                        "grad_bytes: 1MiB\nalgorithm: ring\nprotocol: none\n")
    argv = ["replay", str(workload), "-t", "dgx-h100x2"]
    assert main([*argv, "--max-memory", "1KiB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-memory" in err
    assert main([*argv, "--max-memory", "4GiB"]) == 0


def test_an_address_space_limit_bounds_the_default_budget() -> None:
    """Under ``ulimit -v 4GiB`` the default budget is at most half of it."""
    probe = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)); "
             "from commsim.budget import memory_budget; print(memory_budget())")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True)
    assert 0 < int(done.stdout) <= 2 << 30


def test_small_work_fits_without_asking_the_system(monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to SMALL_BYTES nothing reads the system's memory; beyond, the budget decides; under
    --max-memory its value decides whatever the size."""
    def unreadable() -> int:
        raise AssertionError("the system was asked")

    monkeypatch.setattr(budget, "_system_available", unreadable)
    assert fits(0) and fits(SMALL_BYTES)
    with pytest.raises(AssertionError, match="asked"):
        fits(SMALL_BYTES + 1)
    monkeypatch.setattr(budget, "_system_available", lambda: 4 * SMALL_BYTES)
    assert fits(2 * SMALL_BYTES) and not fits(2 * SMALL_BYTES + 1)
    with limited(1024):
        assert fits(1024) and not fits(1025)
