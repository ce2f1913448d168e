"""PCG32 (O'Neill 2014, XSH-RR output) seeded as tiny-cuda-nn seeds it, so that inr_enc draws tcnn's initial
weights bit for bit.

tcnn initialises a network on the host from ``pcg32{seed}`` (dependencies/pcg32/pcg32.h: stream 1, one draw before
and one after adding the seed), one ``next_float`` per weight. numpy ships PCG64 but not this 32-bit variant, hence
this module; it draws n numbers at once by jumping the 64-bit LCG ahead (state -> a * state + c composes).
"""

from __future__ import annotations

import numpy as np

MULT = 0x5851F42D4C957F2D
MASK64 = (1 << 64) - 1


def _compose(first: tuple[int, int], then: tuple[int, int]) -> tuple[int, int]:
    """The affine map state -> then(first(state)) mod 2^64, each as (multiplier, increment)."""
    return (then[0] * first[0]) & MASK64, (then[0] * first[1] + then[1]) & MASK64


class Pcg32:
    """``Pcg32(seed, stream=1)``: tcnn's ``pcg32 rnd{seed}``. ``next_uints(n)``: [n] uint32; ``next_floats(n)``:
    [n] float32 in [0, 1), tcnn's ``next_float`` (the top 23 bits as a mantissa of [1, 2), minus 1)."""

    def __init__(self, seed: int, stream: int = 1) -> None:
        self.inc = ((stream << 1) | 1) & MASK64
        self.state = 0
        self.next_uints(1)
        self.state = (self.state + seed) & MASK64
        self.next_uints(1)

    def next_uints(self, n: int) -> np.ndarray:
        states = np.array([self.state], dtype=np.uint64)  # the states each output is computed from
        step = (MULT, self.inc)  # advances by len(states)
        while len(states) < n:
            with np.errstate(over="ignore"):
                states = np.concatenate([states, states * np.uint64(step[0]) + np.uint64(step[1])])
            step = _compose(step, step)
        states = states[:n]
        advance = (1, 0)
        for bit in range(n.bit_length()):  # the state after n steps, for the next call
            if n >> bit & 1:
                advance = _compose(advance, self._power(bit))
        self.state = (advance[0] * self.state + advance[1]) & MASK64
        xorshifted = (((states >> np.uint64(18)) ^ states) >> np.uint64(27)).astype(np.uint32)
        rot = (states >> np.uint64(59)).astype(np.uint32)
        return (xorshifted >> rot) | (xorshifted << ((np.uint32(32) - rot) & np.uint32(31)))

    def _power(self, bit: int) -> tuple[int, int]:
        """The map of 2^bit steps."""
        step = (MULT, self.inc)
        for _ in range(bit):
            step = _compose(step, step)
        return step

    def next_floats(self, n: int) -> np.ndarray:
        return ((self.next_uints(n) >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)
