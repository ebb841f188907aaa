"""The forward-cost curve: what a verify forward of q tokens costs on this device and model.

Pure numpy. The decode layer measures it (`rest_core.decode.cost`); the auto budget plans with it
and corrects it by what it observes (`rest_core.budget.auto`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CostCurve:
    """Milliseconds of one verify forward over q tokens, at measured sizes q (each the fastest of a
    few repeats, with a few hundred cached tokens: `rest_core.decode.cost.measure_cost_curve`)."""

    sizes: tuple[int, ...]
    ms: tuple[float, ...]

    def __call__(self, q: np.ndarray | int) -> np.ndarray:
        """Interpolated cost; linear extrapolation past the largest measured size."""
        q = np.asarray(q, dtype=np.float64)
        s, m = np.asarray(self.sizes, np.float64), np.asarray(self.ms, np.float64)
        out = np.interp(q, s, m)
        if len(s) >= 2:
            slope = (m[-1] - m[-2]) / (s[-1] - s[-2])
            out = np.where(q > s[-1], m[-1] + slope * (q - s[-1]), out)
        return out
