"""What-if files: a machine that is not perfect, as data.

A what-if names changes to a healthy topology (``docs/what-if.md``):

* ``links``: an fnmatch pattern over link labels (``gpu3->fabric``, ``nvswitch0->gpu*``) ->
  ``{bandwidth, latency, failed}``: a bandwidth factor of the healthy link (``0.5``) or an
  absolute bandwidth (``"200Gbps"``), a latency *added* to the link's, or a failed link whose
  traffic takes the routes that remain;
* ``ranks``: a rank -> ``{compute: factor}``, a rank whose compute takes ``factor`` times as
  long (a straggler: replay and plan);
* ``jitter``: ``{distribution, sigma, seed}``, a seeded compute factor per rank drawn from a
  named distribution (replay and plan);
* ``nccl``: keys of the topology's ``nccl:`` block set as given (the host's issue time, an
  overhead per call, the release), for faults of the software rather than the links;
  ``nvls: false`` (the host switches no longer reduce) and ``p2p: false`` (no GPU
  peer-to-peer: GPUs of one host exchange through host memory, as ``NCCL_P2P_DISABLE=1``).

This module parses and validates the file into a :class:`WhatIf`; applying it to a network
is :func:`commsim.topology.degrade.degrade`. A what-if is a transform of the machine and of
each rank's compute, nothing else: every command runs unchanged on the result.

>>> w = what_if_from_dict({"links": {"gpu3->fabric": {"bandwidth": 0.5}},
...                        "ranks": {5: {"compute": 1.3}}})
>>> w.links[0].bandwidth_factor, w.compute_factors(8).tolist()
(0.5, [1.0, 1.0, 1.0, 1.0, 1.0, 1.3, 1.0, 1.0])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from commsim import fields
from commsim.errors import SpecError
from commsim.units import split_quantity
from commsim.yamlfile import read_document

#: The keys of a what-if file.
KEYS = ("links", "ranks", "jitter", "nccl", "name")
#: The keys of one link change, and of one rank's.
LINK_KEYS = ("bandwidth", "latency", "failed")
RANK_KEYS = ("compute",)
#: The keys of ``nccl:`` a what-if may set (the rest describe the hardware, which ``links`` does).
NCCL_KEYS = ("host_per_gpu", "overhead", "version", "channels", "nvls", "p2p")
#: The named jitter distributions: the factor a rank's compute is multiplied by.
#: ``lognormal``: exp(N(0, sigma)); ``normal``: 1 + |N(0, sigma)| (a rank is never faster
#: than healthy); ``uniform``: U(1, 1 + sigma).
DISTRIBUTIONS = ("lognormal", "normal", "uniform")
#: The largest compute factor, and the largest sigma, accepted (a rank 1000x slower is no
#: longer a straggler but a failure).
MAX_FACTOR, MAX_SIGMA = 1000.0, 5.0
#: The largest added latency: a link whose latency is a second is a failed link.
MAX_LATENCY_S = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkChange:
    """One ``links:`` entry: the links whose label matches ``pattern`` get their bandwidth
    times ``bandwidth_factor`` or set to ``bandwidth_Bps`` (at most one of the two), their
    latency plus ``added_latency_s``, or fail."""

    pattern: str
    bandwidth_factor: float | None = None
    bandwidth_Bps: float | None = None
    added_latency_s: float = 0.0
    failed: bool = False

    def __post_init__(self) -> None:
        where = f"links[{self.pattern!r}]"
        if self.bandwidth_factor is not None and self.bandwidth_Bps is not None:
            raise SpecError(f"{where}: a factor or a bandwidth, not both")
        if self.bandwidth_factor is not None and not 0 < self.bandwidth_factor <= MAX_FACTOR:
            raise SpecError(f"{where}.bandwidth: a factor must be in (0, {MAX_FACTOR:g}] "
                            f"(got {self.bandwidth_factor:g}); write failed: true for none")
        if not 0 <= self.added_latency_s <= MAX_LATENCY_S:
            raise SpecError(f"{where}.latency: must be from 0 to 1s (got "
                            f"{self.added_latency_s:g} s)")
        if self.failed and (self.bandwidth_factor is not None or self.bandwidth_Bps is not None
                            or self.added_latency_s):
            raise SpecError(f"{where}: a failed link has no bandwidth or latency to change")

    def as_dict(self) -> dict[str, object]:
        """The entry as a what-if file writes it (SI units)."""
        out: dict[str, object] = {}
        if self.failed:
            out["failed"] = True
        if self.bandwidth_factor is not None:
            out["bandwidth"] = self.bandwidth_factor
        if self.bandwidth_Bps is not None:
            out["bandwidth"] = f"{self.bandwidth_Bps:g}B/s"
        if self.added_latency_s:
            out["latency"] = f"{self.added_latency_s:g}s"
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Jitter:
    """A seeded per-rank compute factor from the named ``distribution`` (see
    :data:`DISTRIBUTIONS`) with spread ``sigma``; each rank's factor is drawn once per run,
    in rank order, from ``numpy.random.default_rng(seed)``."""

    distribution: str
    sigma: float
    seed: int = 0

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise SpecError(f"jitter.distribution: unknown {self.distribution!r} "
                            f"(known: {', '.join(DISTRIBUTIONS)})")
        if not 0 <= self.sigma <= MAX_SIGMA:
            raise SpecError(f"jitter.sigma: must be from 0 to {MAX_SIGMA:g} (got {self.sigma:g})")

    def factors(self, ranks: int) -> np.ndarray:
        """One factor per rank, >= 1 except under ``lognormal`` (whose median is 1)."""
        rng = np.random.default_rng(self.seed)
        if self.distribution == "lognormal":
            return np.exp(rng.normal(0.0, self.sigma, ranks))
        if self.distribution == "normal":
            return 1.0 + np.abs(rng.normal(0.0, self.sigma, ranks))
        return rng.uniform(1.0, 1.0 + self.sigma, ranks)


@dataclass(frozen=True, slots=True, kw_only=True)
class WhatIf:
    """A parsed what-if file (see the module docstring); ``name`` names it in outputs."""

    name: str = "what-if"
    links: tuple[LinkChange, ...] = ()
    ranks: tuple[tuple[int, float], ...] = ()
    jitter: Jitter | None = None
    nccl: tuple[tuple[str, object], ...] = ()

    @property
    def changes_network(self) -> bool:
        """Whether the what-if changes links or NCCL (else only compute)."""
        return bool(self.links or self.nccl)

    @property
    def changes_compute(self) -> bool:
        return bool(self.ranks or self.jitter)

    def compute_factors(self, ranks: int) -> np.ndarray:
        """Each of ``ranks`` ranks' compute factor: the jitter's draw times the rank's own
        (1 for a rank the file does not name). A rank beyond ``ranks`` is an error."""
        factors = (self.jitter.factors(ranks) if self.jitter is not None
                   else np.ones(ranks, dtype=np.float64))
        for rank, factor in self.ranks:
            if rank >= ranks:
                raise SpecError(f"ranks.{rank}: the run has {ranks} ranks (0..{ranks - 1})")
            factors[rank] *= factor
        return factors

    def as_dict(self) -> dict[str, Any]:
        """The what-if as a file would hold it (``what_if`` in ``--diagnose``'s JSON)."""
        out: dict[str, Any] = {}
        if self.links:
            out["links"] = {c.pattern: c.as_dict() for c in self.links}
        if self.ranks:
            out["ranks"] = {rank: {"compute": factor} for rank, factor in self.ranks}
        if self.jitter is not None:
            out["jitter"] = {"distribution": self.jitter.distribution,
                             "sigma": self.jitter.sigma, "seed": self.jitter.seed}
        if self.nccl:
            out["nccl"] = dict(self.nccl)
        return out


#: What names a what-if: a file's path, the file's mapping, or one already parsed.
WhatIfSource = str | Path | Mapping[Any, Any] | WhatIf


def load_what_if(source: WhatIfSource) -> WhatIf:
    """A :class:`WhatIf` from a file path, a mapping (as the file's YAML) or one already
    parsed; one-line SpecErrors naming the file and field."""
    if isinstance(source, WhatIf):
        return source
    if isinstance(source, Mapping):
        return what_if_from_dict(source)
    data = read_document(source, "what-if")
    try:
        return what_if_from_dict(fields.mapping(data, ""), name=Path(source).stem)
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from None


def factors_for(what_if: WhatIf, ranks: int, source: object = None) -> np.ndarray:
    """:meth:`WhatIf.compute_factors` of ``ranks`` ranks, a SpecError naming the file
    ``source`` (when it is a path) for a rank beyond them."""
    try:
        return what_if.compute_factors(ranks)
    except SpecError as exc:
        if isinstance(source, str | PathLike):
            raise SpecError(f"{source}: {exc}") from None
        raise


def what_if_from_dict(data: Mapping[Any, Any], name: str = "what-if") -> WhatIf:
    """Parse the mapping of a what-if file (see the module docstring)."""
    data = fields.mapping(data, "")
    fields.check_keys(data, (), KEYS, "")
    if not any(k in data for k in KEYS[:4]):
        raise SpecError(f"what-if: changes nothing (give one of {', '.join(KEYS[:4])})")
    links = tuple(_link_change(str(pattern), value)
                  for pattern, value in fields.mapping(data.get("links", {}), "links").items())
    ranks = tuple(sorted(_rank(key, value)
                         for key, value in fields.mapping(data.get("ranks", {}), "ranks").items()))
    jitter = _jitter(data["jitter"]) if data.get("jitter") is not None else None
    nccl = _nccl(data["nccl"]) if "nccl" in data else ()
    title = fields.string(data["name"], "name") if "name" in data else name
    return WhatIf(name=title, links=links, ranks=ranks, jitter=jitter, nccl=nccl)


def _link_change(pattern: str, value: object) -> LinkChange:
    path = f"links.{pattern}"
    if not pattern.strip():
        raise SpecError("links: an empty pattern matches no link")
    data = fields.mapping(value, path)
    fields.check_keys(data, (), LINK_KEYS, path)
    if not data:
        raise SpecError(f"{path}: changes nothing (give bandwidth, latency or failed)")
    factor = bandwidth = None
    if "bandwidth" in data:
        raw = data["bandwidth"]
        quantity = split_quantity(raw)
        if quantity is not None and not quantity[1]:  # a plain number: a factor
            factor = float(quantity[0])
            if not math.isfinite(factor):
                raise SpecError(f"{path}.bandwidth: must be a finite factor (got {raw!r})")
        else:
            bandwidth = fields.bandwidth(raw, f"{path}.bandwidth")
    latency = fields.time(data["latency"], f"{path}.latency") if "latency" in data else 0.0
    failed = fields.boolean(data.get("failed", False), f"{path}.failed")
    return LinkChange(pattern=pattern, bandwidth_factor=factor, bandwidth_Bps=bandwidth,
                      added_latency_s=latency, failed=failed)


def _rank(key: object, value: object) -> tuple[int, float]:
    rank = fields.nonnegative_int(int(key) if isinstance(key, str) and key.isdigit() else key,
                                  f"ranks.{key}")
    path = f"ranks.{rank}"
    data = fields.mapping(value, path)
    fields.check_keys(data, RANK_KEYS, (), path)
    factor = data["compute"]
    if isinstance(factor, bool) or not isinstance(factor, int | float) \
            or not 0 < factor <= MAX_FACTOR:
        raise SpecError(f"{path}.compute: a factor in (0, {MAX_FACTOR:g}] (got {factor!r})")
    return rank, float(factor)


def _jitter(value: object) -> Jitter:
    data = fields.mapping(value, "jitter")
    fields.check_keys(data, ("distribution", "sigma"), ("seed",), "jitter")
    sigma = data["sigma"]
    if isinstance(sigma, bool) or not isinstance(sigma, int | float) or not math.isfinite(sigma):
        raise SpecError(f"jitter.sigma: must be a number (got {sigma!r})")
    distribution = fields.string(data["distribution"], "jitter.distribution").strip().lower()
    seed = fields.nonnegative_int(data.get("seed", 0), "jitter.seed")
    return Jitter(distribution=distribution, sigma=float(sigma), seed=seed)


def _nccl(value: object) -> tuple[tuple[str, object], ...]:
    data = fields.mapping(value, "nccl")
    fields.check_keys(data, (), NCCL_KEYS, "nccl")
    out: list[tuple[str, object]] = []
    for key in NCCL_KEYS:
        if key not in data:
            continue
        raw, path = data[key], f"nccl.{key}"
        if key in ("host_per_gpu", "overhead"):
            out.append((key, fields.time(raw, path)))
        elif key == "channels":
            out.append((key, fields.positive_int(raw, path)))
        elif key in ("nvls", "p2p"):
            out.append((key, fields.boolean(raw, path)))
        else:
            out.append((key, str(raw)))
    return tuple(out)
