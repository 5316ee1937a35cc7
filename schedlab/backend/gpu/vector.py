"""Vector loads and stores in the GPU dialects (a mixin of `GpuRenderer`).

VectorizeLoop turns a vectorized loop into stores of Ramp-indexed vector values. On a GPU the
point is the memory access: one 8- or 16-byte load or store per thread instead of two or four
(`ld.global.v4.f32`). The arithmetic between them has no vector units to gain from, so a
vector store renders as:

    {
      float4 sl_v = *(const float4*)(A + i * 4);     // each contiguous vector load, once
      float4 sl_r;
      sl_r.x = sl_v.x * 2.0f; ... sl_r.w = sl_v.w * 2.0f;   // the value, lane by lane
      *(float4*)(B + i * 4) = sl_r;                  // one vector store
    }

Alignment: OpenCL's `vloadN`/`vstoreN` (`vload_halfN`/`vstore_halfN_rte` for float16 kept in
memory as half) need only element alignment, so every contiguous access is a vector access.
CUDA's vector types must be aligned to their size: an access is vectorized only when its first
element is provably a multiple of the lanes (its index's constant divisor; buffer parameters
start 256-byte aligned from cudaMalloc, shared/local arrays accessed as vectors are declared
`__align__(16)`) and the whole vector is 4, 8 or 16 bytes; any other access is lane by lane,
with a comment saying why. Strided and gathered accesses are always lane by lane.
"""

from __future__ import annotations

import math

from schedlab.arith import Analyzer
from schedlab.errors import LoweringError
from schedlab.ir import expr as E
from schedlab.ir import stmt as S
from schedlab.ir.functor import Mutator, post_order_visit
from schedlab.ir.structural import structural_equal

from ..c_expr import ATOM
from ..c_vector import LANE_OP, contiguous_base, lane_of
from .half import is_f16

_CUDA_BUILTIN = {("float", 2), ("float", 4), ("int", 2), ("int", 4), ("uint", 2), ("uint", 4),
                 ("double", 2), ("longlong", 2), ("__half", 2)}  # fmt: skip
_CUDA_BUILTIN_NAMES = {f"{n}{k}" if n != "__half" else "__half2" for n, k in _CUDA_BUILTIN}
_OPENCL_NAMES = {"int8": "char", "uint8": "uchar", "int16": "short", "uint16": "ushort",
                 "int32": "int", "uint32": "uint", "int64": "long", "uint64": "ulong",
                 "float32": "float", "float64": "double", "float16": "half"}  # fmt: skip
_CUDA_NAMES = {"int32": "int", "uint32": "uint", "int64": "longlong", "float32": "float",
               "float64": "double", "float16": "__half"}  # fmt: skip


def constant_divisor(index: E.PrimExpr) -> int:
    """A positive integer that provably divides `index` (0 divides by everything: huge)."""
    if isinstance(index, E.IntImm):
        return abs(index.value) or 1 << 30
    if isinstance(index, (E.Add, E.Sub)):
        return math.gcd(constant_divisor(index.a), constant_divisor(index.b))
    if isinstance(index, E.Mul):
        return constant_divisor(index.a) * constant_divisor(index.b)
    return 1


def vector_accessed(func) -> set[int]:
    """ids of the data vars of buffers some vector load or store touches."""
    found: set[int] = set()

    def visit(node):
        if isinstance(node, (E.BufferLoad, S.BufferStore)) and node.indices[0].dtype.lanes > 1:
            found.add(id(node.buffer.data))

    post_order_visit(func.body, visit)
    return found


class _Hoist(Mutator):
    """Replaces each vector load the renderer loads whole by its variable."""

    def __init__(self, loads: list[tuple[E.BufferLoad, E.Var]]):
        self.loads = loads

    def visit_BufferLoad(self, node):
        for load, var in self.loads:
            if node is load or structural_equal(node, load):
                return var
        return self.generic_visit(node)


class _FoldIndices(Mutator):
    """Folds the constants a lane adds to an index (`i * 4 + 1 + 3` -> `i * 4 + 4`)."""

    def __init__(self):
        self.analyzer = Analyzer()

    def visit_BufferLoad(self, node):
        node = self.generic_visit(node)
        return node.replace(indices=tuple(self.analyzer.simplify(i) for i in node.indices))


def lane(expr: E.PrimExpr, index: int) -> E.PrimExpr:
    """The scalar expression of lane `index` of a vector expression, indices folded."""
    part = lane_of(expr, E.IntImm("int32", index))
    if part.dtype.is_integer:  # an index itself
        return Analyzer().simplify(part)
    return _FoldIndices().visit(part)


class VectorMixin:
    """Vector stores (and the loads in their values) for `GpuRenderer`; dialects implement
    `vector_type`, `lane_access`, `vector_load_text` and `vector_store_line`."""

    def setup_vectors(self, func) -> None:
        self._vector_buffers = vector_accessed(func)

    # -- dialect hooks --------------------------------------------------------------------------
    def vector_type(self, dtype) -> str | None:
        """The dialect's type of `dtype` (a vector dtype) in registers, None when it has none."""
        raise NotImplementedError

    def lane_access(self, text: str, lane: int, dtype) -> str:
        """Lane `lane` of the vector `text` of type `dtype`."""
        raise NotImplementedError

    def vector_load_text(self, buffer, base: E.PrimExpr, lanes: int) -> str:
        raise NotImplementedError

    def vector_store_line(self, buffer, base: E.PrimExpr, lanes: int, value: str) -> str:
        raise NotImplementedError

    def vector_ok(self, buffer, base: E.PrimExpr, lanes: int) -> str | None:
        """None when `buffer[base : base + lanes]` can be one vector access, else why not."""
        return None

    # -- rendering ------------------------------------------------------------------------------
    def _e_Call(self, node):
        if node.op == LANE_OP and isinstance(node.args[1], E.IntImm):
            vector, lane = node.args
            return self.lane_access(self._sub(vector, ATOM), lane.value, vector.dtype), ATOM
        return super()._e_Call(node)

    def _contiguous(self, buffer, index) -> tuple[E.PrimExpr | None, str]:
        """(base, "") when the access is one vector access, else (None, why not)."""
        base = contiguous_base(index)
        if base is None:
            return None, "strided"
        if self.vector_type(buffer.dtype.with_lanes(index.dtype.lanes)) is None:
            return None, f"no {buffer.dtype}x{index.dtype.lanes} type"
        why = self.vector_ok(buffer, base, index.dtype.lanes)
        return (None, why) if why else (base, "")

    def _s_BufferStore(self, node: S.BufferStore) -> None:
        index = self.buffer_index(node)
        if index.dtype.lanes == 1 and node.value.dtype.lanes == 1:
            super()._s_BufferStore(node)
            return
        lanes = max(index.dtype.lanes, node.value.dtype.lanes)
        if index.dtype.lanes == 1 or node.buffer.dtype.lanes != 1:
            raise LoweringError(
                f"the {self.dialect} renderer cannot store a {lanes}-lane value into one "
                f"element of {node.buffer.name}"
            )
        self.emit("{")
        self._depth += 1
        self.names.push_scope()
        try:
            self._vector_store(node, index, lanes)
        finally:
            self.names.pop_scope()
            self._depth -= 1
        self.emit("}")

    def _vector_store(self, node: S.BufferStore, index: E.PrimExpr, lanes: int) -> None:
        value = node.value if node.value.dtype.lanes > 1 else E.Broadcast(node.value, lanes)
        hoisted, notes = [], []
        for load in _vector_loads(value):
            base, why = self._contiguous(load.buffer, self.buffer_index(load))
            if base is None:
                notes.append(f"{load.buffer.name} {why}")
                continue
            var = E.Var("sl_v", load.dtype)
            name = self.names.declare(var, "sl_v", internal=True)
            text = self.vector_load_text(load.buffer, base, lanes)
            self.emit(f"{self.vector_type(load.dtype)} {name} = {text};")
            hoisted.append((load, var))
        value = _Hoist(hoisted).visit(value)
        base, why = self._contiguous(node.buffer, index)
        if why:
            notes.append(f"{node.buffer.name} {why}")
        if notes:
            self.emit(f"// lane by lane: {', '.join(notes)}")
        if base is None:
            for k in range(lanes):
                where, part = lane(index, k), lane(value, k)
                self._s_BufferStore(S.BufferStore(node.buffer, part, (where,)))
            return
        if isinstance(value, E.Var):  # a copy: the loaded vector itself
            result = self.names.lookup(value)
        else:
            holder = E.Var("sl_r", node.buffer.dtype.with_lanes(lanes))
            result = self.names.declare(holder, "sl_r", internal=True)
            self.emit(f"{self.vector_type(holder.dtype)} {result};")
            for k in range(lanes):
                part = lane(value, k)
                target = self.lane_access(result, k, holder.dtype)
                self.emit(f"{target} = {self.expr(part)};")
        self.emit(self.vector_store_line(node.buffer, base, lanes, result))


def _vector_loads(value: E.PrimExpr) -> list[E.BufferLoad]:
    loads: list[E.BufferLoad] = []

    def visit(node):
        if isinstance(node, E.BufferLoad) and node.dtype.lanes > 1:
            if not any(structural_equal(node, seen) for seen in loads):
                loads.append(node)

    post_order_visit(value, visit)
    return loads


class CudaVectors:
    """CUDA's vector tokens: float2/float4, int2/int4, __half2, and aligned structs of
    `__half`s (4 or 8) or other elements; the mixin's hooks for CudaRenderer/HipRenderer."""

    def vector_type(self, dtype) -> str | None:
        element = dtype.element_of()
        name = _CUDA_NAMES.get(str(element))
        if name is None or (is_f16(element) and not self.native_half):
            return None
        nbytes = element.bytes * dtype.lanes
        if nbytes not in (4, 8, 16):
            return None
        if (name, dtype.lanes) in _CUDA_BUILTIN:
            return f"{name}{dtype.lanes}" if name != "__half" else "__half2"
        struct = f"sl_{str(element)}x{dtype.lanes}"
        ctype = self.value_ctype(element)
        definition = f"struct __align__({nbytes}) {struct} {{ {ctype} s[{dtype.lanes}]; }};"
        if definition not in self.prelude.preamble:
            self.prelude.preamble += "\n" + definition
        return struct

    def lane_access(self, text: str, lane: int, dtype) -> str:
        builtin = self.vector_type(dtype) in _CUDA_BUILTIN_NAMES
        return f"{text}.{'xyzw'[lane]}" if builtin else f"{text}.s[{lane}]"

    def vector_ok(self, buffer, base, lanes: int) -> str | None:
        if constant_divisor(base) % lanes:
            return f"(index {self.expr(base)} not provably a multiple of {lanes}: unaligned)"
        return None

    def vector_load_text(self, buffer, base, lanes: int) -> str:
        vtype = self.vector_type(buffer.dtype.with_lanes(lanes))
        pointer = f"{self.buffer_ref(buffer)} + {self.expr(base)}"
        return f"*(const {vtype}*)({pointer})"

    def vector_store_line(self, buffer, base, lanes: int, value: str) -> str:
        vtype = self.vector_type(buffer.dtype.with_lanes(lanes))
        return f"*({vtype}*)({self.buffer_ref(buffer)} + {self.expr(base)}) = {value};"


class OpenCLVectors:
    """OpenCL's vector tokens: floatN, intN, halfN (cl_khr_fp16), `.s0`..`.sf`, vloadN/vstoreN
    at any element alignment; float16 kept in memory as half loads and stores as floatN through
    vload_halfN/vstore_halfN_rte."""

    def vector_type(self, dtype) -> str | None:
        element = dtype.element_of()
        name = _OPENCL_NAMES.get(str(element))
        if name is None or dtype.lanes not in (2, 3, 4, 8, 16):
            return None
        if is_f16(element) and not self.native_half:
            name = "float"
        return f"{name}{dtype.lanes}"

    def lane_access(self, text: str, lane: int, dtype) -> str:
        return f"{text}.s{lane:x}"

    def _vector_call(self, buffer, lanes: int, kind: str) -> str:
        if self._carried(buffer.dtype) and self._half_memory(buffer):
            return f"{kind}_half{lanes}" + ("_rte" if kind == "vstore" else "")
        return f"{kind}{lanes}"

    def vector_load_text(self, buffer, base, lanes: int) -> str:
        call = self._vector_call(buffer, lanes, "vload")
        return f"{call}(0, {self.buffer_ref(buffer)} + {self.expr(base)})"

    def vector_store_line(self, buffer, base, lanes: int, value: str) -> str:
        call = self._vector_call(buffer, lanes, "vstore")
        return f"{call}({value}, 0, {self.buffer_ref(buffer)} + {self.expr(base)});"


__all__ = ["VectorMixin", "CudaVectors", "OpenCLVectors", "constant_divisor", "vector_accessed"]
