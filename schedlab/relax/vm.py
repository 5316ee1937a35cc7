"""Compile a graph module and run it: `compile(mod, target)` -> Executable, `VirtualMachine`.

    ex = schedlab.compile(mod, target="cpu")    # default pipeline, every PrimFunc built
    vm = schedlab.relax.VirtualMachine(ex)
    out = vm["main"](x, w)                        # numpy arrays in, numpy arrays out
    print(vm.profile(x, w))                       # per-kernel time table

The Executable keeps each graph function as a list of instructions over registers (the
parameters first): allocate storage / a tensor (in planned storage or fresh), call a kernel
with its outputs, build or index tuples, check a shape, call another graph function, return.
Symbolic dimensions are bound from the arguments' shapes at run time. (A fused kernel that
keeps an intermediate of symbolic size cannot be built by the C backend yet: `compile` raises a
LoweringError naming the kernel.) `If` is not supported by the VM yet.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from schedlab.errors import LoweringError
from schedlab.host_arrays import aligned_empty
from schedlab.ir import expr as E
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.structural import structural_fingerprint
from schedlab.ir.transform import Pass
from schedlab.target import Target

from . import expr as X
from .struct_info import ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo
from .transform.call_tir_rewrite import ALLOC_TENSOR, MEMORY_VIEW
from .transform.static_plan_block_memory import ALLOC_STORAGE, MEMORY_ALLOC_TENSOR


@dataclass(frozen=True)
class Instr:
    """One VM instruction: `op` with operands; `dst` is the register written (or -1)."""

    op: str  # alloc_storage, alloc_tensor, call_kernel, call_func, const, move, tuple,
    # get_item, match, ret
    dst: int = -1
    args: tuple = ()
    info: Any = None  # op-specific: the kernel/function name, a shape, a struct info, ...

    def __str__(self) -> str:
        dst = f"r{self.dst} = " if self.dst >= 0 else ""
        args = ", ".join(f"r{a}" if isinstance(a, int) else str(a) for a in self.args)
        info = "" if self.info is None else f" [{_short(self.info)}]"
        return f"{dst}{self.op}({args}){info}"


def _short(info) -> str:
    if isinstance(info, tuple):
        return "(" + ", ".join(str(i) for i in info) + ")"
    return str(info)


@dataclass(frozen=True)
class _TensorAlloc:
    """An alloc_tensor's shape and dtype; `static` is the shape as ints when no dimension is
    symbolic (most: computed once here, not on every call), else None."""

    dims: tuple
    dtype: str
    static: tuple[int, ...] | None

    @staticmethod
    def of(dims, dtype: str) -> _TensorAlloc:
        dims = tuple(dims)
        static = all(isinstance(d, E.IntImm) for d in dims)
        return _TensorAlloc(dims, dtype, tuple(d.value for d in dims) if static else None)

    def __str__(self) -> str:
        return f"({_short(self.dims)}, {self.dtype})"


@dataclass
class VMFunction:
    """A graph function as instructions: `params` (names), registers used, struct info."""

    name: str
    params: tuple[str, ...]
    param_sinfo: tuple[StructInfo, ...]
    instrs: list[Instr] = field(default_factory=list)
    num_regs: int = 0
    constants: list = field(default_factory=list)

    def __str__(self) -> str:
        head = f"vm function {self.name}({', '.join(self.params)}):"
        return "\n".join([head, *(f"  {k:3d}: {ins}" for k, ins in enumerate(self.instrs))])


class Executable:
    """The result of `compile`: built kernels (name -> Kernel) and VM functions."""

    def __init__(self, mod: IRModule, kernels: dict, functions: dict, target: Target):
        self.mod = mod
        self.kernels = kernels
        self.functions = functions
        self.target = target

    def __repr__(self) -> str:
        return (
            f"<Executable for {self.target.kind}: functions {', '.join(self.functions)}; "
            f"{len(self.kernels)} kernels>"
        )

    def as_text(self) -> str:
        """Every VM function's instructions."""
        return "\n\n".join(str(f) for f in self.functions.values())


# -- compile ----------------------------------------------------------------------------------
def compile(  # noqa: A001 - TVM's name (relax.build / tvm.compile)
    mod: IRModule,
    target: str | Target = "cpu",
    pipeline: Pass | str | None = None,
    database=None,
    kernel_cache: dict | None = None,
) -> Executable:
    """Run `pipeline` (default: the target's `get_default_pipeline`; a name goes to
    `get_pipeline`) on `mod`, build every PrimFunc for `target`, and translate every graph
    function into VM instructions.

    `database` (a `schedlab.tune.Database` or its work_dir) gives the kernels it holds their
    best tuned schedules, before the default schedule takes the rest (TVM's compile_relax);
    it goes into the default pipeline, so it cannot be combined with `pipeline`. It may also
    be schedule bundles (`schedlab.bundle`: a Bundle, a list of them or of their files, a
    bundle file's path): each kernel a bundle was exported from takes its schedule, and a
    bundle that fits no kernel, or is for another target kind, raises BundleError.

    `kernel_cache` (a dict the caller keeps between compiles) holds the built kernels by name
    and function: a kernel compiled before is not lowered again (what `select_in_model` needs
    to compile one model with many schedule choices)."""
    from .pipeline import get_default_pipeline, get_pipeline

    if not isinstance(mod, IRModule):
        raise TypeError(f"compile: expected an IRModule, got {type(mod).__name__}")
    target = Target(target)
    if pipeline is None:
        pipeline = get_default_pipeline(target, database=database)
    elif database is not None:
        raise ValueError(
            "compile: give database= with the default pipeline, or put "
            "schedlab.tune.relax_integration.ApplyDatabase(database) into your pipeline"
        )
    elif isinstance(pipeline, str):
        pipeline = get_pipeline(pipeline)
    with target:
        lowered = pipeline(mod)
    kernels, todo = {}, []
    for name, func in lowered.items():
        if not isinstance(func, PrimFunc):
            continue
        func = func.with_attr("global_symbol", name)
        key = None if kernel_cache is None else (name, structural_fingerprint(func))
        if key in (kernel_cache or {}):
            kernels[name] = kernel_cache[key]
        else:
            todo.append((name, func, key))
    for (name, _, key), kernel in zip(todo, _build_kernels(todo, target), strict=True):
        kernels[name] = kernel
        if kernel_cache is not None:
            kernel_cache[key] = kernel
    kernels = {name: kernels[name] for name in lowered.keys() if name in kernels}  # module order
    functions = {
        name: _Translator(name, lowered).translate(func)
        for name, func in lowered.items()
        if isinstance(func, X.Function)
    }
    return Executable(lowered, kernels, functions, target)


class _Translator:
    """Graph function (VM form) -> VMFunction."""

    def __init__(self, name: str, mod: IRModule):
        self.mod = mod
        self.regs: dict = {}
        self.vmf: VMFunction | None = None
        self.name = name
        self.binding = "the parameters"

    def translate(self, func: X.Function) -> VMFunction:
        params = tuple(p.name_hint for p in func.params)
        self.vmf = VMFunction(self.name, params, tuple(p.struct_info_ for p in func.params))
        for param in func.params:
            self.regs[param] = self._new_reg()
        body = func.body
        blocks = body.blocks if isinstance(body, X.SeqExpr) else ()
        for block in blocks:
            for binding in block.bindings:
                self.binding = binding.var.name_hint
                self._binding(binding)
        self.binding = "the function output"
        result = body.body if isinstance(body, X.SeqExpr) else body
        self._emit("ret", -1, (self.value(result),))
        return self.vmf

    def _new_reg(self) -> int:
        self.vmf.num_regs += 1
        return self.vmf.num_regs - 1

    def _emit(self, op: str, dst: int, args=(), info=None) -> int:
        self.vmf.instrs.append(Instr(op, dst, tuple(args), info))
        return dst

    def _binding(self, binding: X.Binding) -> None:
        reg = self.value(binding.value)
        if isinstance(binding, X.MatchCast):
            self._emit("match", -1, (reg,), binding.struct_info)
        self.regs[binding.var] = reg

    def value(self, expr: X.Expr) -> int:
        """The register holding `expr`'s value (instructions emitted as needed)."""
        if isinstance(expr, X.Var):
            if expr not in self.regs:
                raise self.error(f"variable {expr.name_hint!r} is used before it is defined")
            return self.regs[expr]
        if isinstance(expr, X.Constant):
            self.vmf.constants.append(expr.data)  # aligned, read-only (relax.Constant)
            return self._emit("const", self._new_reg(), (), len(self.vmf.constants) - 1)
        if isinstance(expr, X.Tuple):
            fields = [self.value(f) for f in expr.fields]
            return self._emit("tuple", self._new_reg(), fields)
        if isinstance(expr, X.TupleGetItem):
            src = self.value(expr.tuple_value)
            return self._emit("get_item", self._new_reg(), (src,), expr.index)
        if isinstance(expr, X.ShapeExpr):
            return self._emit("shape", self._new_reg(), (), expr.values)
        if isinstance(expr, X.PrimValue):
            return self._emit("prim", self._new_reg(), (), expr.value)
        if isinstance(expr, X.Call):
            return self._call(expr)
        raise self.error(f"the VM cannot run a {type(expr).__name__} (not supported yet)")

    def _call(self, call: X.Call) -> int:
        if isinstance(call.op, X.GlobalVar):
            name = call.op.name_hint
            callee = self.mod.get(name)
            args = [self.value(a) for a in call.args]
            if isinstance(callee, PrimFunc):
                return self._emit("call_kernel", -1, args, name)
            if isinstance(callee, X.Function):
                return self._emit("call_func", self._new_reg(), args, name)
            raise self.error(f"calls {name!r}, which is not a function of the module")
        if call.op == ALLOC_STORAGE:
            return self._emit("alloc_storage", self._new_reg(), (), call.args[0].values[0])
        if call.op == ALLOC_TENSOR:
            info = _TensorAlloc.of(call.args[0].values, call.attrs["dtype"])
            return self._emit("alloc_tensor", self._new_reg(), (), info)
        if call.op == MEMORY_ALLOC_TENSOR:
            storage = self.value(call.args[0])
            info = _TensorAlloc.of(call.args[2].values, call.attrs["dtype"])
            return self._emit("alloc_tensor", self._new_reg(), (storage,), info)
        if call.op == MEMORY_VIEW:
            base = self.value(call.args[0])
            info = _TensorAlloc.of(call.args[1].values, call.attrs["dtype"])
            offset = call.args[2].value
            if info.static is None or not isinstance(offset, E.IntImm):
                raise self.error("a memory view needs a static shape and offset")
            return self._emit("view", self._new_reg(), (base,), (info, offset.value))
        raise self.error(
            f"the VM cannot call {call.op!r}: run the pipeline first (LegalizeOps, "
            f"CallTIRRewrite) so only kernel calls and allocations remain"
        )

    def error(self, message: str) -> LoweringError:
        return LoweringError(
            f"compile: function {self.name!r}, binding {self.binding!r}: {message}"
        )


# -- run ----------------------------------------------------------------------------------------
@dataclass
class ProfileRow:
    name: str
    calls: int
    total_ms: float

    @property
    def mean_ms(self) -> float:
        return self.total_ms / self.calls


class ProfileReport:
    """Per-kernel time table from `VirtualMachine.profile` (slowest first); `str()` prints it."""

    def __init__(self, rows: list[ProfileRow], total_ms: float):
        self.rows = sorted(rows, key=lambda r: -r.total_ms)
        self.total_ms = total_ms

    def __str__(self) -> str:
        width = max([len("kernel"), *(len(r.name) for r in self.rows)])
        lines = [f"{'kernel':<{width}}  {'calls':>5}  {'total ms':>10}  {'mean ms':>10}"]
        for r in self.rows:
            lines.append(
                f"{r.name:<{width}}  {r.calls:>5}  {r.total_ms:>10.4f}  {r.mean_ms:>10.4f}"
            )
        lines.append(f"{'(whole call)':<{width}}  {'':>5}  {self.total_ms:>10.4f}")
        return "\n".join(lines)

    __repr__ = __str__


def _build_kernels(todo: list, target: Target) -> list:
    """The kernel of every (name, PrimFunc, _) in `todo`, in order. Two threads build them when
    there are several and the pass context records nothing (its instruments would see two
    kernels' passes interleaved): while gcc compiles one kernel, a subprocess that leaves the
    GIL free, the other thread lowers the next one in Python."""
    from concurrent.futures import ThreadPoolExecutor

    from schedlab.backend.build import build
    from schedlab.ir.transform import PassContext

    context = PassContext.current()

    def one(item):
        name, func, _ = item
        with context, target:  # both are per thread: the worker takes the caller's
            try:
                return build(func, target, name=name)
            except LoweringError as err:  # say which kernel of the graph it was
                raise LoweringError(f"compile: kernel {name!r}: {err}") from err

    if len(todo) < 2 or context.instruments:
        return [one(item) for item in todo]
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="schedlab-build") as pool:
        return list(pool.map(one, todo))


class VirtualMachine:
    """Runs an Executable: `vm["main"](*arrays)`, `vm.profile(*arrays)`."""

    def __init__(self, executable: Executable):
        if not isinstance(executable, Executable):
            raise TypeError(f"VirtualMachine: expected an Executable, got {executable!r}")
        self.executable = executable
        # planned storage kept between calls: a fresh 3 MB block is ~750 page faults on first
        # touch (a conv writing 64x111x111 floats: 0.76 ms in warm storage, 1.55 ms in fresh);
        # one free list per (function, instruction), so concurrent calls never share a block
        self._storage: dict[tuple[str, int], list[_Block]] = {}
        self._views: dict[int, tuple] = {}  # id(Instr) -> (base tensor, its view), `_op_view`

    def __getitem__(self, name: str) -> Callable:
        if name not in self.executable.functions:
            known = ", ".join(self.executable.functions)
            raise KeyError(f"VirtualMachine: no function {name!r}; the executable has {known}")
        return lambda *arrays: self.invoke(name, arrays)

    def invoke(self, name: str, arrays: Sequence, timer: dict | None = None):
        """Run the function `name` on `arrays`; `timer` (kernel -> [calls, seconds]) collects
        kernel times when given."""
        return _Call(self.executable, name, timer, self._storage, self._views).run(arrays)

    def profile(self, *arrays, func_name: str = "main") -> ProfileReport:
        """Run `func_name` once and time each kernel call."""
        self[func_name]  # the KeyError for an unknown name
        timer: dict = {}
        start = time.perf_counter()
        self.invoke(func_name, arrays, timer)
        total = (time.perf_counter() - start) * 1e3
        rows = [ProfileRow(k, calls, sec * 1e3) for k, (calls, sec) in timer.items()]
        return ProfileReport(rows, total)


class _Call:
    """One call of a VM function: registers, bound symbolic dims."""

    def __init__(self, ex: Executable, name: str, timer: dict | None, storage: dict,
                 views: dict):  # fmt: skip
        self.ex, self.vmf, self.timer, self.views = ex, ex.functions[name], timer, views
        self.regs: list = [None] * self.vmf.num_regs
        self.dims: dict = {}
        self.storage = storage  # the VM's free blocks, (function, instruction) -> [array]
        self.taken: list[tuple[tuple[str, int], _Block]] = []  # blocks this call holds
        self.fresh: set[int] = set()  # ids of tensors allocated for this call alone

    def run(self, arrays: Sequence):
        try:
            self._bind_params(arrays)
            for index, ins in enumerate(self.vmf.instrs):
                if ins.op == "ret":
                    return _copy_out(self.regs[ins.args[0]], self.fresh)
                if ins.op == "alloc_storage":
                    value = self._storage_block(index, ins)
                else:
                    value = _HANDLERS[ins.op](self, ins, [self.regs[a] for a in ins.args])
                if ins.dst >= 0:
                    self.regs[ins.dst] = value
            raise RuntimeError(f"{self.vmf.name}: no return instruction")
        finally:  # results never alias storage (`_copy_out`), so it is free again
            for key, block in self.taken:
                self.storage.setdefault(key, []).append(block)

    def _bind_params(self, arrays: Sequence) -> None:
        vmf = self.vmf
        if len(arrays) != len(vmf.params):
            raise ValueError(
                f"{vmf.name}: expected {len(vmf.params)} argument(s) ({', '.join(vmf.params)}), "
                f"got {len(arrays)}"
            )
        for k, (name, sinfo, array) in enumerate(zip(vmf.params, vmf.param_sinfo, arrays)):
            value = _as_value(array)
            _match(sinfo, value, self.dims, f"{vmf.name}: parameter {name!r}")
            self.regs[k] = value

    # -- instructions -------------------------------------------------------------------------
    def _op_const(self, ins: Instr, args):
        return self.vmf.constants[ins.info]

    def _op_tuple(self, ins: Instr, args):
        return tuple(args)

    def _op_get_item(self, ins: Instr, args):
        return args[0][ins.info]

    def _op_shape(self, ins: Instr, args):
        return tuple(self._dim(v) for v in ins.info)

    def _op_prim(self, ins: Instr, args):
        from .interpreter import _prim

        return _prim(ins.info, self.dims)

    def _op_match(self, ins: Instr, args):
        _match(ins.info, args[0], self.dims, f"{self.vmf.name}: match_cast")

    def _storage_block(self, index: int, ins: Instr) -> _Block:
        """A block of planned storage: one this instruction used in an earlier call when one
        of the right size is free, else a new one."""
        key, size = (self.vmf.name, index), self._dim(ins.info)
        try:
            block = self.storage.get(key, []).pop()
        except IndexError:  # none free (first call, or other threads hold them)
            block = None
        if block is None or block.array.size != size:  # symbolic sizes changed: a new block
            block = _Block(size)
        self.taken.append((key, block))
        return block

    def _op_alloc_tensor(self, ins: Instr, args):
        alloc = ins.info
        shape = alloc.static or tuple(self._dim(d) for d in alloc.dims)
        dtype = alloc.dtype
        if not args:
            tensor = aligned_empty(shape, dtype)
            self.fresh.add(id(tensor))
            return tensor
        return args[0].view(ins, shape, dtype)

    def _op_view(self, ins: Instr, args):
        """A part of a tensor (PlanConcatInPlace's): made once per base tensor, so a kernel
        writing it sees the same array object on every call, as with planned storage."""
        (base,), (alloc, offset) = args, ins.info
        made = self.views.get(id(ins))
        if made is not None and made[0] is base:
            return made[1]
        nbytes = math.prod(alloc.static) * np.dtype(alloc.dtype).itemsize
        flat = base.reshape(-1).view(np.uint8)
        tensor = flat[offset : offset + nbytes].view(alloc.dtype).reshape(alloc.static)
        if id(base) not in self.fresh:  # a fresh base is this call's alone: not kept
            self.views[id(ins)] = (base, tensor)
        return tensor

    def _op_call_kernel(self, ins: Instr, args):
        kernel = self.ex.kernels[ins.info]
        if self.timer is None:
            _launch(kernel, args)
            return None
        start = time.perf_counter()
        _launch(kernel, args)
        entry = self.timer.setdefault(ins.info, [0, 0.0])
        entry[0] += 1
        entry[1] += time.perf_counter() - start
        return None

    def _op_call_func(self, ins: Instr, args):
        return _Call(self.ex, ins.info, self.timer, self.storage, self.views).run(args)

    def _dim(self, value) -> int:
        if isinstance(value, int):
            return value
        if isinstance(value, E.IntImm):  # a static dimension: most of them, on every call
            return value.value
        from .interpreter import _prim

        try:
            return int(_prim(value, self.dims))
        except KeyError as err:
            raise ValueError(f"{self.vmf.name}: symbolic dimension {err} is not bound") from None


_HANDLERS = {name[4:]: f for name, f in vars(_Call).items() if name.startswith("_op_")}


class _Block:
    """A block of planned storage and the tensors made of it. The tensor an instruction makes
    of it is made once and handed out again while its shape holds, so a static function passes
    its kernels the same array objects on every call, which they recognize and launch without
    re-checking (`call_checked_once`: light_squeezenet's 41 launches spent 0.54 ms of Python
    per call, now 0.16)."""

    __slots__ = ("array", "views")

    def __init__(self, size: int):
        self.array = aligned_empty(size, np.uint8)
        self.views: dict[int, tuple[tuple, str, np.ndarray]] = {}  # id(Instr) -> view

    def view(self, ins: Instr, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        made = self.views.get(id(ins))  # instructions live as long as the executable
        if made is not None and made[0] == shape and made[1] == dtype:
            return made[2]
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        tensor = self.array[:nbytes].view(dtype).reshape(shape)
        self.views[id(ins)] = (shape, dtype, tensor)
        return tensor


def _launch(kernel, args) -> None:
    """Run a kernel; one that checks its arguments only once per shape signature (a compiled
    CPU kernel: the VM passes the same shapes every call) does so."""
    checked_once = getattr(kernel, "call_checked_once", None)
    if checked_once is not None:
        checked_once(args)
    else:
        kernel(*args)


def _as_value(array):
    if isinstance(array, (tuple, list)):
        return tuple(_as_value(a) for a in array)
    return np.ascontiguousarray(array) if isinstance(array, np.ndarray) else np.asarray(array)


def _copy_out(value, fresh: set[int]):
    """Results as arrays of their own: never a view of planned storage or a caller's argument.
    A tensor allocated for this call alone is returned as it is, once (copying a 3 MB output
    cost 0.65 ms); `fresh` loses the ids returned."""
    if isinstance(value, tuple):
        return tuple(_copy_out(v, fresh) for v in value)
    if not isinstance(value, np.ndarray):
        return value
    if id(value) in fresh:
        fresh.discard(id(value))
        return value
    return np.array(value, copy=True)


def _match(sinfo: StructInfo, value, dims: dict, what: str) -> None:
    """Check `value` against `sinfo` (ValueError naming `what`), binding new symbolic dims."""
    if isinstance(sinfo, TensorStructInfo):
        _match_tensor(sinfo, value, dims, what)
    elif isinstance(sinfo, TupleStructInfo):
        if not isinstance(value, tuple) or len(value) != len(sinfo.fields):
            raise ValueError(f"{what}: expected a {len(sinfo.fields)}-tuple, got {type(value)}")
        for k, (item_info, item) in enumerate(zip(sinfo.fields, value)):
            _match(item_info, item, dims, f"{what}[{k}]")
    elif isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        _match_dims(sinfo.values, tuple(value), dims, what)


def _match_tensor(sinfo: TensorStructInfo, value, dims: dict, what: str) -> None:
    if not isinstance(value, np.ndarray):
        raise ValueError(f"{what}: expected a numpy array, got {type(value).__name__}")
    if sinfo.ndim >= 0 and value.ndim != sinfo.ndim:
        raise ValueError(f"{what}: expected rank {sinfo.ndim} ({sinfo}), got shape {value.shape}")
    if value.dtype != sinfo.dtype.numpy:
        raise ValueError(f"{what}: expected dtype {sinfo.dtype}, got {value.dtype}")
    if sinfo.shape is not None:
        _match_dims(sinfo.shape, value.shape, dims, what)


def _match_dims(expected, shape, dims: dict, what: str) -> None:
    from .interpreter import _prim

    for dim, size in zip(expected, shape):
        if isinstance(dim, E.Var) and dim not in dims:
            dims[dim] = int(size)
            continue
        try:
            want = int(_prim(dim, dims))
        except KeyError:
            continue  # a compound expression of unbound dims: nothing to check yet
        if want != int(size):
            shown = ", ".join(str(d) for d in expected)
            raise ValueError(f"{what}: expected shape ({shown}), got {tuple(shape)}")
