"""A GPU predicted latency: a per-SM roofline with occupancy, from the target's description.

`predict_gpu(func, target)` lowers the function for the GPU target (the kernels, their launch
sizes, shared and local allocations are those of the generated code) and, per kernel:

- work per thread: the floating-point operations of every store and the bytes of every global
  load and store, times the trip counts of the loops around them (both branches of a predicate
  counted: an upper bound for edge tiles);
- occupancy: blocks resident per SM, the least of the block limit, the threads per SM (blocks
  rounded up to whole warps), the register file (an estimate: 24 registers per thread plus one
  per 32-bit word of its "local" arrays) and shared memory; `limiter` names which;
- compute: the SM's FP32 lanes (`fp32_units_per_sm`, one FMA = 2 FLOP per lane per cycle at
  `clock_ghz`), used in proportion to the threads resident (a block of 1 thread feeds one lane)
  and to the warps there are to hide latency (`LATENCY_WARPS` per SM saturate it); every block
  of a wave runs on its own SM's share, waves rounded up (a last partial wave costs a wave);
- shared memory: the distinct shared loads of each loop body (a value loaded twice stays in a
  register) at `SHARED_BYTES_PER_CYCLE` per SM;
- memory: DRAM traffic is the compulsory bytes of the global buffers the kernel touches at
  `mem_bandwidth_gbs`; all global accesses go through L2 at `L2_BANDWIDTH_RATIO` times that;
  both scaled by the fraction of the GPU the resident warps keep busy;
- the kernel takes max(compute, shared, DRAM, L2) plus a launch overhead; a function's kernels
  add up.

CUDA cores only: no kernel schedlab makes uses tensor cores yet, so their peak is not used.
Attributes a target may set to refine it: max_threads_per_sm, max_blocks_per_sm,
shared_memory_per_sm (defaults below, NVIDIA-like).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from schedlab.arith.evaluate import evaluate
from schedlab.ir import expr as E
from schedlab.ir import stmt as S
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.node import child_fields
from schedlab.target import Target

SHARED_BYTES_PER_CYCLE = 128  # per SM: 32 banks of 4 bytes
LATENCY_WARPS = 8  # resident warps per SM that hide arithmetic and memory latency
L2_BANDWIDTH_RATIO = 3.0  # L2 bandwidth / DRAM bandwidth
LAUNCH_SECONDS = 3e-6  # per kernel launch
BASE_REGISTERS = 24  # indices, addresses, loop counters per thread
DEFAULT_THREADS_PER_SM = 2048
DEFAULT_BLOCKS_PER_SM = 32


@dataclass
class KernelPrediction:
    """One kernel of the function: launch, occupancy and the terms of its roofline."""

    name: str
    grid: int  # blocks
    block: int  # threads per block
    flops: float
    global_bytes: float  # every global load/store, all threads
    dram_bytes: float  # compulsory: the global buffers touched, once
    shared_bytes: int  # per block
    registers: int  # per thread (estimate)
    blocks_per_sm: int  # at most, by the SM's resources
    resident_blocks: int  # per SM in a full wave (fewer when the grid is small)
    limiter: str  # what bounds blocks_per_sm: blocks / threads / registers / shared
    occupancy: float  # resident warps / the SM's warp slots (fewer blocks than SMs: less)
    waves: int
    terms: dict[str, float]  # seconds: compute, shared, DRAM, L2
    seconds: float
    bound: str


@dataclass
class GpuPrediction:
    """Predicted latency of a function on a GPU, with the fields the explorer shows (as
    `schedlab.cost.Prediction`: seconds, bound, flops, bytes_moved, roofline_seconds, peaks)."""

    seconds: float
    bound: str
    flops: int
    bytes_moved: dict[str, float]
    roofline_seconds: float
    peaks: dict[str, float]
    kernels: list[KernelPrediction] = field(default_factory=list)
    nests: list = field(default_factory=list)  # no CPU nests: the kernels say it

    def notes(self) -> list[list[str]]:
        """[label, text] per kernel, for the explorer's assumptions table."""
        return [[f"kernel {k.name}",
                 f"{k.seconds * 1e3:.3f} ms, {k.bound}-bound, grid {k.grid} x block {k.block}, "
                 f"occupancy {k.occupancy:.0%} ({k.resident_blocks} blocks/SM, at most "
                 f"{k.blocks_per_sm}: {k.limiter}-limited), {k.waves} wave(s)"]
                for k in self.kernels]  # fmt: skip

    def summary(self) -> str:
        lines = [
            f"predicted {self.seconds * 1e3:.3f} ms, {self.bound}-bound, "
            f"{self.flops / 1e6:.1f} MFLOP, roofline {self.roofline_seconds * 1e3:.3f} ms"
        ]
        lines += [f"  {label}: {text}" for label, text in self.notes()]  # fmt: skip
        return "\n".join(lines)


def predict_gpu(func_or_mod, target: str | Target) -> GpuPrediction:
    """The predicted latency of a PrimFunc (or a one-function module) on GPU `target`."""
    from schedlab.transform import lower

    from .predict import as_func

    target = Target(target)
    if not target.is_gpu:
        raise ValueError(f"predict_gpu: {target.kind!r} is not a GPU target")
    func = as_func(func_or_mod)
    name = func.attrs.get("global_symbol", "main") if func.attrs else "main"
    lowered = lower(IRModule({name: func}), target)
    kernels = [_predict_kernel(key, kernel, target) for key, kernel in lowered.items()
               if isinstance(kernel, PrimFunc) and "gpu.launch" in kernel.attrs]  # fmt: skip
    if not kernels:
        raise ValueError("predict_gpu: the lowered function has no GPU kernel")
    flops = sum(k.flops for k in kernels)
    dram = sum(k.dram_bytes for k in kernels)
    peaks = {"FLOP/s (fp32 lanes)": _sm_flops(target) * target.num_sms,
             "DRAM bytes/s": target.mem_bandwidth_gbs * 1e9}  # fmt: skip
    roofline = max(flops / peaks["FLOP/s (fp32 lanes)"], dram / peaks["DRAM bytes/s"])
    slowest = max(kernels, key=lambda k: k.seconds)
    return GpuPrediction(
        seconds=sum(k.seconds for k in kernels), bound=slowest.bound, flops=int(flops),
        bytes_moved={"DRAM": dram, "L2": sum(k.global_bytes for k in kernels)},
        roofline_seconds=roofline, peaks=peaks, kernels=kernels,
    )  # fmt: skip


def _sm_flops(target: Target) -> float:
    return target.fp32_units_per_sm * 2 * target.clock_ghz * 1e9


def _predict_kernel(name: str, kernel: PrimFunc, target: Target) -> KernelPrediction:
    launch = {key: _int(value) for key, value in kernel.attrs["gpu.launch"].items()}
    grid = math.prod(v for k, v in launch.items() if k.startswith("blockIdx")) or 1
    block = math.prod(v for k, v in launch.items() if k.startswith("threadIdx")) or 1
    work = _Work()
    work.visit(kernel.body, 1)
    touched = work.global_buffers
    dram = sum(math.prod(_int(d) for d in b.shape) * b.dtype.bytes for b in touched.values())
    registers = min(BASE_REGISTERS + work.local_bytes // 4, target.max_registers_per_thread)
    blocks_per_sm, limiter = _residency(block, registers, work.shared_bytes, target)
    warp = max(target.warp_size, 1)
    warps_per_block = -(-block // warp)
    max_warps = target.attrs.get("max_threads_per_sm", DEFAULT_THREADS_PER_SM) // warp
    active_sms = min(target.num_sms, grid)
    per_sm = min(blocks_per_sm, -(-grid // target.num_sms))  # blocks an SM holds at once
    waves = -(-grid // (target.num_sms * blocks_per_sm))
    resident_warps = per_sm * warps_per_block
    latency = min(1.0, resident_warps / LATENCY_WARPS)
    lanes = min(1.0, per_sm * block / target.fp32_units_per_sm)
    block_flops = work.flops * block
    compute = waves * per_sm * block_flops / (_sm_flops(target) * lanes * latency)
    shared_rate = SHARED_BYTES_PER_CYCLE * target.clock_ghz * 1e9 * latency
    shared = waves * per_sm * work.shared_load_bytes * block / shared_rate
    busy = active_sms / target.num_sms * latency  # of the GPU's memory parallelism
    bandwidth = target.mem_bandwidth_gbs * 1e9 * busy
    terms = {"compute": compute, "shared": shared, "DRAM": dram / bandwidth,
             "L2": work.global_bytes * block * grid / (bandwidth * L2_BANDWIDTH_RATIO)}  # fmt: skip
    bound = max(terms, key=terms.get)
    return KernelPrediction(
        name=name, grid=grid, block=block, flops=block_flops * grid,
        global_bytes=work.global_bytes * block * grid, dram_bytes=dram,
        shared_bytes=work.shared_bytes, registers=registers, blocks_per_sm=blocks_per_sm,
        resident_blocks=per_sm, limiter=limiter, occupancy=resident_warps / max(max_warps, 1),
        waves=waves, terms=terms, seconds=terms[bound] + LAUNCH_SECONDS, bound=bound,
    )  # fmt: skip


def _residency(block: int, registers: int, shared: int, target: Target) -> tuple[int, str]:
    """Blocks resident per SM and the resource that limits them (ValueError: none fits)."""
    attrs = target.attrs
    warp = max(target.warp_size, 1)
    threads = -(-block // warp) * warp
    limits = {
        "blocks": attrs.get("max_blocks_per_sm", DEFAULT_BLOCKS_PER_SM),
        "threads": attrs.get("max_threads_per_sm", DEFAULT_THREADS_PER_SM) // threads,
        "registers": target.registers_per_sm // (threads * registers),
    }
    if shared:
        per_sm = attrs.get("shared_memory_per_sm", 4 * target.max_shared_memory_per_block)
        limits["shared"] = per_sm // shared
    limiter = min(limits, key=limits.get)
    if limits[limiter] < 1:
        raise ValueError(f"predict_gpu: a block of {block} threads does not fit on an SM "
                         f"({limiter}: {limits})")  # fmt: skip
    return limits[limiter], limiter


class _Work:
    """Per-thread FLOPs and global bytes of a lowered kernel, its shared and local bytes."""

    def __init__(self):
        self.flops = 0.0
        self.global_bytes = 0.0
        self.shared_bytes = 0
        self.local_bytes = 0
        self.shared_load_bytes = 0.0  # distinct shared loads per loop body (registers reuse)
        self.global_buffers: dict[str, object] = {}
        self._seen: list[set] = [set()]

    def visit(self, stmt, trips: float) -> None:
        if isinstance(stmt, S.For):
            self._expr(stmt.extent, trips)
            self._seen.append(set())
            self.visit(stmt.body, trips * _int(stmt.extent))
            self._seen.pop()
        elif isinstance(stmt, S.BufferStore):
            self._global(stmt.buffer, trips)
            self._expr(stmt.value, trips, count=True)
        elif isinstance(stmt, S.Allocate):
            size = math.prod(_int(d) for d in stmt.buffer.shape) * stmt.buffer.dtype.bytes
            if stmt.buffer.scope == "shared":
                self.shared_bytes += size
            elif stmt.buffer.scope == "local":
                self.local_bytes += size
            self.visit(stmt.body, trips)
        else:
            for name in child_fields(type(stmt)):
                self._child(getattr(stmt, name), trips)

    def _child(self, value, trips: float) -> None:
        if isinstance(value, tuple):
            for item in value:
                self._child(item, trips)
        elif isinstance(value, S.Stmt):
            self.visit(value, trips)
        elif isinstance(value, E.PrimExpr):
            self._expr(value, trips)

    def _expr(self, node, trips: float, count: bool = False) -> None:
        if isinstance(node, E.BufferLoad):
            self._global(node.buffer, trips)
            key = str(node)
            if node.buffer.scope == "shared" and key not in self._seen[-1]:
                self._seen[-1].add(key)
                self.shared_load_bytes += trips * node.buffer.dtype.bytes
        elif count and isinstance(node, E.BinaryOp) and node.dtype.is_float:
            if not isinstance(node, (E.CmpOp, E.LogicalOp)):
                self.flops += trips
        elif count and isinstance(node, E.Call) and node.dtype.is_float:
            self.flops += trips  # a math function: one operation (more in fact)
        for name in child_fields(type(node)):
            value = getattr(node, name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, E.PrimExpr):
                    self._expr(item, trips, count)

    def _global(self, buffer, trips: float) -> None:
        if buffer.scope == "global":
            self.global_bytes += trips * buffer.dtype.bytes
            self.global_buffers[buffer.name] = buffer


def _int(value) -> int:
    if isinstance(value, int):
        return value
    try:
        result = evaluate(value, {})
    except Exception:  # a free variable
        result = None
    if not isinstance(result, int):
        raise ValueError(f"predict_gpu: a symbolic size ({value}): give the sizes")
    return result


__all__ = ["GpuPrediction", "KernelPrediction", "predict_gpu"]
