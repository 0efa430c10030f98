"""What ``calibrate`` fits in a template: its parameters, their start values and bounds, and
how a parameter vector becomes a topology spec again.

Link classes are fitted as (latency, 1/bandwidth), so that a predicted time is piecewise
linear in them; a ``custom`` template gets a latency and a bandwidth factor per distinct
(latency, bandwidth) pair of links; ``gamma`` is optional.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from commsim.errors import SpecError
from commsim.nccl_tables import NcclConfig
from commsim.topology.nccl_spec import NcclSpec
from commsim.topology.spec import (
    CustomLinkSpec,
    CustomSpec,
    FlatSpec,
    HierarchicalSpec,
    LinkSpec,
    TopologySpec,
    TorusSpec,
)


@dataclass(frozen=True, slots=True)
class Param:
    """One fitted number: its name in reports, its kind, and where it goes in the spec."""

    name: str  # e.g. "intra.latency"
    kind: str  # "latency" (s), "inverse_bandwidth" (s/B), "gamma" (s/B), "latency_scale"...
    klass: str  # the link class ("link", "intra", "inter", "links[0..3]", "gamma", "nccl")


#: Physical bounds of the fitted values (SI), so a parameter the data hardly constrains
#: settles at a plausible extreme instead of 0 or infinity.
BOUNDS = {
    "latency": (1e-9, 10.0),
    "inverse_bandwidth": (1e-14, 1e-5),  # 100 TB/s .. 100 KB/s
    "gamma": (1e-16, 1e-6),
    "latency_scale": (1e-4, 1e4),
    "inverse_bandwidth_scale": (1e-4, 1e4),
    "call_time": (1e-9, 1e-3),
}
#: How close (relative, in the fitted variable) to a bound counts as on it.
BOUND_TOLERANCE = 1e-6


def _custom_classes(spec: CustomSpec) -> list[tuple[float, float]]:
    classes: list[tuple[float, float]] = []
    for link in spec.links:
        key = (link.latency_s, link.bandwidth_Bps)
        if key not in classes:
            classes.append(key)
    return classes


def template_parameters(
    spec: TopologySpec, multi_host: bool, fit_gamma: bool, gpus_per_thread: int | None = None
) -> tuple[list[Param], np.ndarray, Callable[[np.ndarray], TopologySpec]]:
    """The fitted parameters of ``spec``, their start values, and ``x -> spec``. A template
    with an ``nccl:`` block also has its floor's machine-specific times fitted: the GPUs'
    ``overhead`` per call and, where a host thread drives several GPUs (``gpus_per_thread``,
    the run's, else the template's), the host's ``host_per_gpu``."""
    params: list[Param] = []
    start: list[float] = []

    def add_link(klass: str, link: LinkSpec) -> None:
        params.append(Param(f"{klass}.latency_s", "latency", klass))
        params.append(Param(f"{klass}.bandwidth_Bps", "inverse_bandwidth", klass))
        start.extend([max(link.latency_s, 1e-9), 1.0 / link.bandwidth_Bps])

    classes: list[tuple[float, float]] = []
    if isinstance(spec, FlatSpec | TorusSpec):
        add_link("link", spec.link)
    elif isinstance(spec, HierarchicalSpec):
        add_link("intra", spec.intra)
        if multi_host:
            add_link("inter", spec.inter)
    elif isinstance(spec, CustomSpec):
        classes = _custom_classes(spec)
        for i, (latency, _) in enumerate(classes):
            klass = f"links[{i}]"
            if latency > 0:
                params.append(Param(f"{klass}.latency_scale", "latency_scale", klass))
                start.append(1.0)
            params.append(Param(f"{klass}.bandwidth_scale", "inverse_bandwidth_scale", klass))
            start.append(1.0)
    else:
        raise SpecError(f"cannot calibrate a topology of kind {spec.kind!r}")
    if fit_gamma:
        params.append(Param("gamma_s_per_B", "gamma", "gamma"))
        start.append(max(spec.gamma_s_per_B, 1e-13))
    nccl = spec.nccl
    if nccl is not None:
        for param, value in _floor_parameters(nccl, gpus_per_thread or nccl.gpus_per_thread):
            params.append(param)
            start.append(value)

    def build(x: np.ndarray) -> TopologySpec:
        values = {p.name: float(v) for p, v in zip(params, x, strict=True)}
        replace: dict[str, object] = {}

        def link(klass: str) -> LinkSpec:
            bandwidth = 1.0 / values[f"{klass}.bandwidth_Bps"]
            template: LinkSpec = getattr(spec, klass)
            reduction = template.reduction_bandwidth_Bps
            return LinkSpec(
                latency_s=values[f"{klass}.latency_s"],
                bandwidth_Bps=bandwidth,
                # an in-network reducing switch keeps its efficiency relative to the port
                reduction_bandwidth_Bps=None
                if reduction is None
                else reduction * bandwidth / template.bandwidth_Bps,
            )

        if isinstance(spec, FlatSpec | TorusSpec):
            replace["link"] = link("link")
        elif isinstance(spec, HierarchicalSpec):
            replace["intra"] = link("intra")
            if "inter.latency_s" in values:
                replace["inter"] = link("inter")
        elif isinstance(spec, CustomSpec):
            replace["links"] = _custom_built(spec, classes, values)
        if "gamma_s_per_B" in values:
            replace["gamma_s_per_B"] = values["gamma_s_per_B"]
        if nccl is not None:
            replace["nccl"] = _floor_built(nccl, values)
        return dataclasses.replace(spec, **replace)  # type: ignore[arg-type]

    return params, np.asarray(start, dtype=float), build


def _custom_built(spec: CustomSpec, classes: list[tuple[float, float]],
                  values: dict[str, float]) -> tuple[CustomLinkSpec, ...]:
    """``spec``'s links, each class's latency and bandwidth scaled by its fitted factors."""
    links = []
    for item in spec.links:
        i = classes.index((item.latency_s, item.bandwidth_Bps))
        a = values.get(f"links[{i}].latency_scale", 1.0)
        b = values[f"links[{i}].bandwidth_scale"]
        links.append(CustomLinkSpec(src=item.src, dst=item.dst, latency_s=item.latency_s * a,
                                    bandwidth_Bps=item.bandwidth_Bps / b, duplex=item.duplex))
    return tuple(links)


def _floor_parameters(nccl: NcclSpec, gpus_per_thread: int) -> list[tuple[Param, float]]:
    """The floor's machine times of an ``nccl:`` block and their start values: the GPUs'
    ``overhead`` per call, and the host's ``host_per_gpu`` where a thread drives several."""
    low = BOUNDS["call_time"][0]
    out = [(Param("nccl.overhead_s", "call_time", "nccl"), max(nccl.overhead_s, low))]
    if gpus_per_thread > 1:
        per_gpu = NcclConfig.from_meta(nccl.as_meta()).host_per_gpu_s  # the model's if unset
        out.append((Param("nccl.host_per_gpu_s", "call_time", "nccl"), max(per_gpu, low)))
    return out


def _floor_built(nccl: NcclSpec, values: dict[str, float]) -> NcclSpec:
    """``nccl`` with the floor's fitted times of ``values`` (a time at its bound as 0)."""
    per_gpu = values.get("nccl.host_per_gpu_s")
    return dataclasses.replace(
        nccl, overhead_s=_zeroed(values["nccl.overhead_s"]),
        host_per_gpu_s=nccl.host_per_gpu_s if per_gpu is None else _zeroed(per_gpu))


def _zeroed(seconds: float) -> float:
    """A fitted call time, at its lower bound (log space's zero) as 0."""
    low = BOUNDS["call_time"][0]
    return 0.0 if seconds <= low * (1 + BOUND_TOLERANCE) else seconds


def reported(params: list[Param], x: np.ndarray) -> dict[str, float]:
    """Fitted values in SI for the report (bandwidths, not their inverses)."""
    out: dict[str, float] = {}
    for p, value in zip(params, x, strict=True):
        if p.kind == "call_time":
            out[p.name] = _zeroed(float(value))
        elif p.kind == "inverse_bandwidth":
            out[p.name] = 1.0 / float(value)
        elif p.kind == "inverse_bandwidth_scale":
            out[p.name] = 1.0 / float(value)  # the factor bandwidths were multiplied by
        else:
            out[p.name] = float(value)
    return out
