"""Running CUDA kernels through cupy (a GPU machine only; NOT exercised by the test suite,
which has no GPU: there the PTX is checked, and the same kernels run through OpenCL).

The PTX from NVRTC is loaded with `cupy.RawModule(path=...)`; arguments are copied to the
device with `cupy.asarray`, results back with `.get()`. cupy is imported on the first launch,
so building (and reading `.source` / `.ptx`) works without it.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from schedlab.errors import ToolchainMissingError

from ..gpu.launch import Device, Launch

INSTALL_HINT = (
    "running CUDA kernels needs an NVIDIA GPU and cupy: `pip install cupy-cuda12x` (building "
    "them to PTX needs only `pip install 'schedlab[cuda]'`)"
)


def _cupy():
    try:
        import cupy
    except ImportError:
        raise ToolchainMissingError(f"cupy is not installed: {INSTALL_HINT}") from None
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # no driver or no device
        raise ToolchainMissingError(f"no CUDA device: {err}; {INSTALL_HINT}") from None
    return cupy


class CupyDevice(Device):
    """`Device` over cupy; the module is loaded on the first launch."""

    def __init__(self, ptx: str):
        self.ptx = ptx
        self._module = None
        self._functions: dict[str, object] = {}

    @property
    def cp(self):
        return _cupy()

    def _function(self, symbol: str):
        if self._module is None:
            fd, path = tempfile.mkstemp(suffix=".ptx")
            with os.fdopen(fd, "w") as handle:
                handle.write(self.ptx)
            try:
                self._module = self.cp.RawModule(path=path)
            finally:
                os.unlink(path)
        function = self._functions.get(symbol)
        if function is None:
            function = self._module.get_function(symbol)
            self._functions[symbol] = function
        return function

    def upload(self, array: np.ndarray):
        return self.cp.asarray(array)

    def empty(self, nbytes: int):
        return self.cp.empty(max(nbytes, 1), dtype=self.cp.uint8)

    def download(self, handle, out: np.ndarray) -> None:
        out[...] = handle.get().reshape(out.shape)

    def run(self, launch: Launch, grid, block, args: list) -> None:
        self._function(launch.symbol)(tuple(grid), tuple(block), tuple(args))

    def synchronize(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()


__all__ = ["CupyDevice", "INSTALL_HINT"]
