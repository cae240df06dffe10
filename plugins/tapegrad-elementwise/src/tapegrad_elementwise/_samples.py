"""Seeded sample inputs for the contract kit: values inside each op's domain and away
from its kinks, and the broadcasting cases every binary op is checked on."""

import numpy as np


class Draw:
    """Seeded sample values: the same arrays every time the plugin registers."""

    def __init__(self, seed):
        self._rng = np.random.default_rng(seed)

    def normal(self, *shape):
        return self._rng.standard_normal(shape)

    def positive(self, *shape):
        """In [0.5, 2]: inside the domain of log, sqrt, a power's base."""
        return self._rng.uniform(0.5, 2.0, shape)

    def nonzero(self, *shape):
        """|v| in [0.2, 2]: away from the kinks of abs, sign and relu and from 1/0."""
        return self._rng.choice([-1.0, 1.0], shape) * self._rng.uniform(0.2, 2.0, shape)

    def exponent(self, *shape):
        return self._rng.uniform(-1.5, 2.5, shape)

    def small_ints(self, *shape):
        """Integer-valued floats in {-1, 0, 1}, so comparisons meet equal entries."""
        return self._rng.integers(-1, 2, shape).astype(np.float64)

    def bools(self, *shape):
        return self._rng.random(shape) < 0.5

    def away_from(self, points, *shape, gap=0.1):
        """Uniform in [-2, 2], moved at least `gap` away from each of `points`."""
        v = self._rng.uniform(-2.0, 2.0, shape)
        for p in points:
            near = np.abs(v - p) < gap
            v[near] = p + 2 * gap + (v[near] - p)
        return v

    def uniform(self, lo, hi, *shape):
        """Uniform in [lo, hi]: an op's domain, e.g. (-0.8, 0.8) for arcsin."""
        return self._rng.uniform(lo, hi, shape)

    def off_grid(self, *shape, step=1.0):
        """Multiples of `step` in [-3, 3) plus a fraction in [0.1, 0.4] or [0.6, 0.9] of
        it: away from the jumps of floor/ceil/trunc (integers) and rint/round (halves)."""
        frac = self._rng.uniform(0.1, 0.4, shape) + 0.5 * self._rng.integers(0, 2, shape)
        return step * (self._rng.integers(-3, 3, shape) + frac)

    def divisors(self, *shape):
        """±1, ±2 or ±4: an off_grid dividend over one of them stays 0.025 or more away
        from an integer quotient, where remainder, fmod and floor_divide jump."""
        return self._rng.choice([-4.0, -2.0, -1.0, 1.0, 2.0, 4.0], shape)


def binary_samples(a, b, scalar_a=1.5, scalar_b=2.5):
    """The broadcasting cases every binary op is checked on; `a`, `b`: shape -> array."""
    return [(a(3, 4), b(3, 4)), (a(3, 4), b(4)), (a(2, 1, 3), b(4, 1)),
            (a(3), scalar_b), (scalar_a, b(2, 2))]


def unary_samples(a):
    return [(a(3, 4),), (a(2, 1, 3),), (np.asarray(a()),)]

