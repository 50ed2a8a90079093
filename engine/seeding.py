"""Seeds -> torch generators, injective on the whole documented range [0, 2**64 - 1].

`torch.Generator().manual_seed(s)` keeps only the low 32 bits of `s` (mt19937's init_genrand
takes a 32-bit word), so seeds 0 and 2**32 would give the same run. Here:

- seeds below 2**32 keep `manual_seed` (every stored run and report stays reproducible);
- a larger seed fills the whole mt19937 state from a splitmix64 stream started at the seed.
  splitmix64's first output is a bijection of the seed; it becomes state words 1 and 2 (all of
  their bits enter the recurrence), so two different seeds give two different states. Word 3 is
  nudged off the init_genrand relation, so such a state is never one that a seed below 2**32
  produces. The mt19937 transition is invertible and its tempering too, so different states give
  different random streams: no two seeds in range share a run by construction.
"""

from __future__ import annotations

import numpy as np
import torch

from .params import SEED_MAX  # noqa: F401  (the seed rule's home: engine.params.seed_number)

_M64 = (1 << 64) - 1
_N = 624  # mt19937 state words
_HEADER = 24  # torch's CPU generator state: u64 initial seed, i32 left, i32 seeded, u64 next, u64 state[624], ...


def _splitmix64(seed: int, n: int) -> list[int]:
    out, z = [], seed
    for _ in range(n):
        z = (z + 0x9E3779B97F4A7C15) & _M64
        x = z
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
        out.append(x ^ (x >> 31))
    return out


def _init_genrand_next(prev: int, i: int) -> int:
    return (1812433253 * (prev ^ (prev >> 30)) + i) & 0xFFFFFFFF


def mt_words(seed: int) -> list[int]:
    """The 624 mt19937 state words for a seed >= 2**32 (see the module docstring)."""
    r = _splitmix64(seed, _N // 2 + 1)
    words = [0] * _N
    words[0] = 0x80000000  # only its top bit is used by the recurrence
    words[1], words[2] = r[0] & 0xFFFFFFFF, r[0] >> 32
    for j in range(3, _N):
        x = r[1 + (j - 3) // 2]
        words[j] = (x >> 32) if (j - 3) % 2 else (x & 0xFFFFFFFF)
    if words[3] == _init_genrand_next(words[2], 3):
        words[3] ^= 1
    return words


def generator_for(seed: int) -> torch.Generator:
    """A CPU torch.Generator for `seed` in [0, 2**64 - 1] (see the module docstring)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise ValueError(f"seed must be an integer in [0, 2**64 - 1], got {seed!r}")
    g = torch.Generator()
    if seed < 2**32:
        return g.manual_seed(seed)
    g.manual_seed(0)  # a valid state to patch: left = 1, next = 0, no cached normal sample
    state = g.get_state().numpy().copy()
    state[:8] = np.frombuffer(np.uint64(seed).tobytes(), dtype=np.uint8)
    state[_HEADER:_HEADER + 8 * _N] = np.frombuffer(np.array(mt_words(seed), dtype="<u8").tobytes(), dtype=np.uint8)
    g.set_state(torch.from_numpy(state))
    return g
