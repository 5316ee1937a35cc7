"""The host side of a GPU function: its kernels in launch order, their arguments and sizes.

A lowered GPU function is one or more kernels (schedlab.transform.thread_binding): each has a
grid and block size ("gpu.launch": blockIdx extents may use the sizes bound from the argument
shapes), parameters that are the function's buffers, the symbolic sizes, and workspace buffers
(intermediates between kernels) that the host allocates. `GpuKernel` runs them on numpy
arrays through a `Device` (OpenCL through pyopencl, CUDA through cupy): copy the arguments in,
launch each kernel in order, copy the written ones back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from schedlab.arguments import BoundArguments
from schedlab.arith.evaluate import evaluate
from schedlab.errors import LoweringError
from schedlab.ir.function import IRModule, PrimFunc

from ..build import Kernel
from ..c_family import CParam, RenderedModule


@dataclass(frozen=True)
class Launch:
    """One kernel of a function: its symbol, lowered PrimFunc and C parameters."""

    symbol: str
    func: PrimFunc
    params: tuple[CParam, ...]

    @property
    def workspace(self) -> tuple[str, ...]:
        return tuple(self.func.attrs.get("gpu.workspace", ()))

    def sizes(self, env: dict) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(grid, block) for the sizes in `env` ({Var: int})."""
        launch = self.func.attrs.get("gpu.launch", {})

        def dims(prefix):
            return tuple(
                int(evaluate(launch[f"{prefix}.{a}"], env)) if f"{prefix}.{a}" in launch else 1
                for a in "xyz"
            )

        return dims("blockIdx"), dims("threadIdx")


def launches(rendered: RenderedModule, lowered: IRModule, name: str) -> list[Launch]:
    """The kernels of function `name` in launch order."""
    found = []
    for key, func in lowered.items():
        if isinstance(func, PrimFunc) and func.attrs.get("gpu.host") == name:
            info = rendered.functions[key]
            found.append((func.attrs.get("gpu.order", 0), Launch(info.symbol, func, info.params)))
    if not found:
        hosts = sorted({f.attrs.get("gpu.host") for f in lowered.functions().values()} - {None})
        raise ValueError(f"no GPU function {name!r}; the module has {', '.join(hosts) or 'none'}")
    return [launch for _, launch in sorted(found, key=lambda item: item[0])]


class Device:
    """What a GPU runtime provides to `GpuKernel` (pyopencl, cupy)."""

    def upload(self, array: np.ndarray):
        raise NotImplementedError

    def empty(self, nbytes: int):
        raise NotImplementedError

    def download(self, handle, out: np.ndarray) -> None:
        raise NotImplementedError

    def run(self, launch: Launch, grid, block, args: list) -> None:
        raise NotImplementedError

    def scalar(self, value, dtype) -> object:
        return np.dtype(str(dtype) if str(dtype) != "bool" else "int8").type(value)

    def synchronize(self) -> None:
        raise NotImplementedError


class GpuKernel(Kernel):
    """A compiled GPU function (see `Kernel`): `.launches` lists its kernels."""

    def __init__(self, name, func, lowered, target, source, launches_: list[Launch], device):
        super().__init__(name, func, lowered, target, source)
        self.launches = launches_
        self.device = device
        self._positions = {id(p): i for i, p in enumerate(func.params)}
        self._names = {p.name: i for i, p in enumerate(func.params)}

    def written_params(self) -> set[str]:
        return {p.var.name for launch in self.launches for p in launch.params
                if p.role == "buffer" and p.written and p.var.name in self._names}  # fmt: skip

    def _launch(self, bound: BoundArguments) -> None:
        self._run(bound, 1)

    def _run_timed(self, bound: BoundArguments, number: int) -> float:
        return self._run(bound, number)

    def _run(self, bound: BoundArguments, number: int) -> float:
        env = dict(bound.var_values)
        table = bound.values_by_id()
        device = self.device
        handles: dict[int, object] = {}  # original param index -> device buffer
        for launch in self.launches:
            for param in launch.params:
                index = self._param_index(param)
                if param.role == "buffer" and index is not None and index not in handles:
                    handles[index] = device.upload(np.ascontiguousarray(bound.values[index]))
        spaces = self._workspace(env)
        plans = [(launch, *launch.sizes(env), self._args(launch, bound, table, handles, spaces))
                 for launch in self.launches]  # fmt: skip
        device.synchronize()
        start = time.perf_counter()
        for _ in range(number):
            for launch, grid, block, args in plans:
                if all(g > 0 for g in grid):
                    device.run(launch, grid, block, args)
        device.synchronize()
        elapsed = time.perf_counter() - start
        written = self.written_params()
        for index, handle in handles.items():
            if self.func.params[index].name in written:
                device.download(handle, bound.values[index])
        return elapsed

    def _param_index(self, param: CParam) -> int | None:
        index = self._positions.get(id(param.var))
        return index if index is not None else self._names.get(param.var.name)

    def _workspace(self, env: dict) -> dict[str, object]:
        spaces = {}
        for launch in self.launches:
            for param in launch.params:
                if param.role == "buffer" and param.var.name in launch.workspace:
                    if param.var.name not in spaces:
                        count = 1
                        for extent in param.buffer.shape:
                            count *= int(evaluate(extent, env))
                        nbytes = max(count, 1) * param.buffer.dtype.bytes
                        spaces[param.var.name] = self.device.empty(nbytes)
        return spaces

    def _args(self, launch: Launch, bound, table, handles, spaces) -> list:
        args = []
        for param in launch.params:
            if param.role == "buffer":
                if param.var.name in launch.workspace:
                    args.append(spaces[param.var.name])
                else:
                    args.append(handles[self._param_index(param)])
                continue
            value = self._scalar_value(param, bound, table)
            args.append(self.device.scalar(value, param.dtype))
        return args

    def _scalar_value(self, param: CParam, bound, table):
        index = self._param_index(param)
        if index is not None:
            return bound.values[index]
        if id(param.var) in table:
            return table[id(param.var)]
        for var, value in bound.var_values.items():
            if var.name == param.var.name and var.dtype == param.var.dtype:
                return value
        raise LoweringError(
            f"{self.name}: the size variable {param.var.name} is not determined by any argument"
        )


__all__ = ["Launch", "launches", "Device", "GpuKernel"]


class GpuLibrary:
    """The rendered kernels of a lowered module on one device; `kernel(name)` is a callable
    `GpuKernel` (the CUDA and OpenCL back ends' libraries)."""

    def __init__(self, rendered: RenderedModule, lowered: IRModule, target, device: Device):
        self.rendered = rendered
        self.lowered = lowered
        self.target = target
        self.device = device

    @property
    def source(self) -> str:
        return self.rendered.source

    def kernel(self, name: str, original=None) -> GpuKernel:
        runs = launches(self.rendered, self.lowered, name)
        func = original if original is not None else runs[0].func
        return GpuKernel(name, func, self.lowered, self.target, self.source, runs, self.device)
