"""The inner fit of ``calibrate``: bounded least squares on log-predictions that are linear in x.

Predicted times are ``c + J @ x`` (x: latencies, inverse bandwidths, ...; ``c`` the part of each
time no fitted parameter moves: NCCL's launch latency, the host's issue time); the fit minimises
the squared log ratio to the measured times, so small and large sizes weigh alike.
"""

from __future__ import annotations

import math

import numpy as np

#: Gauss-Newton iterations at most.
MAX_INNER = 200


def solve_log_linear(
    jac: np.ndarray, target: np.ndarray, x0: np.ndarray, low: np.ndarray, high: np.ndarray,
    offset: np.ndarray | None = None,
) -> np.ndarray:
    """``argmin sum (log(c + J x) - log t)^2`` over ``low <= x <= high`` by damped Gauss-Newton
    in ``u = log x`` (projected onto the bounds); ``c`` is ``offset`` (none: 0)."""
    log_t = np.log(target)
    u_low, u_high = np.log(low), np.log(high)
    u = np.clip(np.log(x0), u_low, u_high)
    const = np.zeros(len(target)) if offset is None else offset

    def cost(u: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        pred = const + jac @ np.exp(u)
        if np.any(pred <= 0):
            return math.inf, pred, np.empty(0)
        r = np.log(pred) - log_t
        return float(r @ r), pred, r

    current, pred, r = cost(u)
    damping = 1e-3
    for _ in range(MAX_INNER):
        g_jac = jac * np.exp(u)[None, :] / pred[:, None]  # d r_i / d u_c
        normal = g_jac.T @ g_jac
        gradient = g_jac.T @ r
        improved = False
        for _ in range(30):
            step = np.linalg.solve(normal + damping * np.diag(np.diag(normal) + 1e-12), -gradient)
            candidate = np.clip(u + step, u_low, u_high)
            value, new_pred, new_r = cost(candidate)
            if value < current:
                improved = True
                converged = current - value <= 1e-15 * max(1.0, current)
                u, current, pred, r = candidate, value, new_pred, new_r
                damping = max(damping / 3, 1e-12)
                break
            damping *= 4
        if not improved or converged:
            break
    return np.exp(u)
