"""`jit`: numba's compiler for the few hot loops of retrieval and tree building.

Retrieval, trie building and tree layout run once per decoding step and must cost well under a
millisecond; in numpy they are dozens of small array calls (each a few microseconds here) and
a per-row Python loop for the trie, which misses that by 5-10x (measured: see bench-retrieval).
The kernels are plain Python over numpy arrays, so without numba (or with NUMBA_DISABLE_JIT=1)
they run unchanged, only slower. Compiled code is cached on disk (cache=True): only the first
run on a machine pays the compile time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from numba import njit as _njit
except ImportError:  # pragma: no cover - numba is in requirements.txt
    _njit = None

HAVE_NUMBA = _njit is not None


def jit(fn: Callable[..., Any] | None = None, *, inline: bool = False) -> Any:
    """Compile `fn` with numba (nopython, cached) when available, else return it unchanged.

    inline=True inlines a small helper into its (compiled) callers: a call that passes arrays
    otherwise costs reference counting on every call, which dominates tight loops.
    """
    if fn is None:
        return lambda f: jit(f, inline=inline)
    if _njit is None:  # pragma: no cover
        return fn
    return _njit(cache=True, nogil=True, inline="always" if inline else "never")(fn)
