"""Evicting arrays from every CPU cache level, so a kernel can be timed as a model runs it.

Timed back to back, a kernel finds its weights in the caches; inside a model they may come from
memory, the other layers' data having evicted them since the last inference (a 3x3 conv with
9 MB of weights took 0.66 ms warm and 0.99 ms cold on an Intel Xeon; docs/tuning.md, "Warm or
cold caches", says what tuning that way gave). `flush(array)` writes back and
invalidates every cache line of the array (x86 `clflush`, AArch64 `dc civac`), like the cache
flush of TVM's CPU runner.

The helper is C compiled once with the kernels' toolchain (cached on disk like a kernel).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

_SOURCE = r"""
#include <stddef.h>
#include <stdint.h>

/* Write back and invalidate the cache lines of [data, data + nbytes). 64 bytes is the smallest
   line size of the architectures below; a larger line is flushed more than once, harmlessly. */
void sl_flush_lines(const void *data, size_t nbytes) {
  const char *start = (const char *)((uintptr_t)data & ~(uintptr_t)63);
  const char *end = (const char *)data + nbytes;
#if defined(__x86_64__) || defined(__i386__)
  for (const char *p = start; p < end; p += 64) __builtin_ia32_clflush(p);
  __builtin_ia32_mfence();
#elif defined(__aarch64__)
  for (const char *p = start; p < end; p += 64)
    __asm__ volatile("dc civac, %0" ::"r"(p) : "memory");
  __asm__ volatile("dsb ish" ::: "memory");
#else
#error "schedlab's cache flush knows x86 and AArch64 only"
#endif
}
"""

_lock = threading.Lock()
_function = None


def _flush_function():
    global _function
    with _lock:
        if _function is None:
            from .compiler import compile_source

            library = ctypes.CDLL(str(compile_source(_SOURCE, None, "cache_flush")))
            function = library.sl_flush_lines
            function.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            function.restype = None
            _function = function
        return _function


def flush(array: np.ndarray) -> None:
    """Evict `array`'s memory from every cache level of this CPU (a no-op for an empty one)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"flush: expected a numpy array, got {type(array).__name__}")
    if array.nbytes == 0:
        return
    low = high = array.ctypes.data
    for extent, stride in zip(array.shape, array.strides):
        if stride < 0:
            low += stride * (extent - 1)
        else:
            high += stride * (extent - 1)
    _flush_function()(low, high + array.itemsize - low)


__all__ = ["flush"]
