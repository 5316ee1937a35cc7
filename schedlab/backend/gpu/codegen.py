"""GPU dialects of the C-family renderer: CUDA C, HIP and OpenCL C.

Each is a token table over `CFamilyRenderer` (schedlab/backend/c_family.py), which renders the
loops, expressions, names and helpers for every C-like target; what differs is here: kernel
qualifiers, address spaces, thread indices, the barrier, math names and a preamble in place of
the C headers the device compilers lack (NVRTC and OpenCL C have no <stdint.h>).

Input is the kernels of `schedlab.transform.lower(func, gpu_target)`: one `__global__` /
`__kernel` function per kernel, returning void, its launch sizes in a comment:

    // launch: grid (3, 3, 1), block (16, 16, 1)
    extern "C" __global__ void __launch_bounds__(256) gemm_kernel(float* __restrict__ C, ...) {
      __shared__ float A_shared[256];
      int32_t i_0 = (int32_t)blockIdx.y;
      ...
      __syncthreads();
"""

from __future__ import annotations

import dataclasses

from schedlab.errors import LoweringError
from schedlab.ir import expr as E
from schedlab.ir import stmt as S
from schedlab.transform.cross_thread_reduction import SHUFFLE_DOWN
from schedlab.transform.thread_binding import BARRIER, BLOCK_SCOPES, THREAD_INDEX, scope_of

from ..c_expr import ATOM
from ..c_family import CFamilyRenderer, RenderedFunction, RenderedModule
from ..c_names import C_KEYWORDS, C_LIBRARY
from .half import HalfMixin, is_f16
from .mma import MmaMixin
from .vector import CudaVectors, OpenCLVectors, VectorMixin

_INT_TYPES = """\
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef {long64} int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned {long64} uint64_t;
#define INT64_C(c) c##{suffix}
#define UINT64_C(c) c##U{suffix}
#define INT64_MIN (-INT64_C(9223372036854775807) - 1)"""

# NVRTC has no C library headers: it gets the types and constants here; nvcc (and hipcc) have
# them, and redeclaring int64_t there is an error, so the source compiles under both
_CUDA_PREAMBLE = (
    "#if defined(__CUDACC_RTC__)\n"
    + _INT_TYPES.format(long64="long long", suffix="LL")
    + """
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#define memcpy(dst, src, n) __builtin_memcpy(dst, src, n)
#else
#include <stdint.h>
#include <math.h>
#endif"""
)

_OPENCL_PREAMBLE = _INT_TYPES.format(long64="long", suffix="L")

# float16 carried as float on an OpenCL device without cl_khr_fp16: round through the core
# vstore_half_rte/vload_half (a `half` variable needs the extension; a ushort's bytes do not)
_OPENCL_ROUND_F16 = """\
static inline float sl_round_f16(float f) {
  ushort h; vstore_half_rte(f, 0, (half*)&h); return vload_half(0, (const half*)&h);
}
"""

CPP_KEYWORDS = frozenset("""
class delete new operator private protected public template this throw try catch using
virtual namespace friend mutable explicit typename export nullptr constexpr decltype
noexcept static_assert thread_local alignas alignof char16_t char32_t wchar_t
""".split())  # fmt: skip
CUDA_NAMES = frozenset("""
gridDim warpSize dim3 int2 int3 int4 float2 float3 float4 double2 half
__syncthreads __shared__ __global__ __device__ __restrict__ __launch_bounds__
""".split())  # fmt: skip
OPENCL_NAMES = frozenset("""
kernel global local constant private read_only write_only read_write half uchar ushort uint
ulong float2 float4 float8 float16 int2 int4 image2d_t image3d_t sampler_t event_t barrier
get_group_id get_local_id get_global_id get_local_size get_num_groups rint mad fma
""".split())  # fmt: skip


class GpuRenderer(VectorMixin, HalfMixin, CFamilyRenderer):
    """What the GPU dialects share: kernels return nothing, thread indices and the barrier come
    from the lowered intrinsics, scratch arrays have constant sizes (no heap on the device),
    float16 is the device's half type where it has one (schedlab/backend/gpu/half.py)."""

    headers: tuple[str, ...] = ()
    return_type = "void"
    dialect = "gpu"
    shared_qualifier = ""
    helper_qualifier = "static inline"  # how the prelude's helpers are declared
    thread_index: dict[str, str] = {}

    def __init__(self, target=None):
        super().__init__(target)
        self.setup_half(self.native_half_on(target))

    def native_half_on(self, target) -> bool:
        """Hook: whether the device computes in its half type (CUDA/HIP: always)."""
        return True

    def render(self, mod) -> RenderedModule:
        rendered = super().render(mod)
        if self.helper_qualifier != "static inline":
            rendered.source = rendered.source.replace("static inline ", self.helper_qualifier + " ")
        return rendered

    # -- hooks ----------------------------------------------------------------------------------
    def function_prologue(self, info: RenderedFunction) -> list[str]:
        return []

    def function_epilogue(self, info: RenderedFunction) -> list[str]:
        return []

    def _render_function(self, func, name, symbol, symbols):
        self.setup_vectors(func)
        lines, info = super()._render_function(func, name, symbol, symbols)
        grid, block = launch_dims(func)
        lines.insert(1, f"// launch: grid ({', '.join(grid)}), block ({', '.join(block)})")
        info.last_line += 1
        info.loop_lines = {
            uid: dataclasses.replace(
                span, first=span.first + 1, header=span.header + 1, last=span.last + 1
            )
            for uid, span in info.loop_lines.items()
        }
        return lines, info

    def local_array(self, ctype: str, name: str, count: int, buffer) -> str:
        qualifier = self.shared_qualifier if scope_of(buffer) in BLOCK_SCOPES else ""
        return f"{qualifier}{ctype} {name}[{max(count, 1)}];"

    def _allocate(self, node: S.Allocate) -> None:
        buffer = node.buffer
        count = self._constant_count(
            buffer, f"buffer {buffer.name} ({scope_of(buffer)})",
            f" inside a {self.dialect} kernel; device scratch needs a constant size (compact "
            "it to a constant tile)",
        )  # fmt: skip
        if scope_of(buffer) == "global":
            raise LoweringError(
                f"buffer {buffer.name} (global scope) is allocated inside a {self.dialect} "
                "kernel: give it scope 'shared' or 'local' (set_scope), or bind the stages "
                "that use it to separate kernels"
            )
        ctype = self.scratch_ctype(buffer.dtype)
        name = self.names.declare(buffer.data, buffer.name)
        self._ptr_types[id(buffer.data)] = ctype
        self.emit(self.local_array(ctype, name, count, buffer))
        self.stmt(node.body)

    @staticmethod
    def _constant_count(buffer, subject: str, remedy: str) -> int:
        """The element count of `buffer`, which device code allocates: its shape must be
        constant, else a LoweringError naming it (`subject`) and what to do (`remedy`)."""
        count = 1
        for extent in buffer.shape:
            if not isinstance(extent, E.IntImm):
                raise LoweringError(f"{subject} has the run-time size {tuple(buffer.shape)}"
                                    f"{remedy}")  # fmt: skip
            count *= extent.value
        return count

    def scratch_ctype(self, dtype) -> str:
        """Hook: the element type of a shared/local array of `dtype`."""
        return self.storage_ctype(dtype)

    def loop_style(self, loop: S.For):
        if loop.kind == S.ForKind.UNROLLED and self.unroll_pragma:
            return "unroll", [self.unroll_pragma], ""
        if loop.kind == S.ForKind.PARALLEL:
            return "serial", [], "parallel kind runs serially inside a GPU thread"
        return super().loop_style(loop)

    unroll_pragma = ""

    # -- expressions ----------------------------------------------------------------------------
    def _e_Call(self, node):
        if node.op == THREAD_INDEX:
            tag = node.args[0].value
            return f"(int32_t){self.thread_index[tag]}", 15  # a cast: unary precedence
        if node.op == BARRIER:
            return self.barrier_call, 16
        if node.op == SHUFFLE_DOWN:
            value, offset, width = (self.expr(arg) for arg in node.args)
            return self.shuffle_down(value, offset, width), 16
        return super()._e_Call(node)

    def shuffle_down(self, value: str, offset: str, width: str) -> str:
        raise LoweringError(
            f"{self.dialect} has no warp shuffles: lower cross-thread reductions for it with "
            "the shared-memory tree (LowerCrossThreadReduction with an OpenCL target)"
        )

    def known_nonneg(self, node) -> bool:
        if isinstance(node, E.Call) and node.op == THREAD_INDEX:
            return True
        return super().known_nonneg(node)


def launch_dims(func) -> tuple[list[str], list[str]]:
    """(grid, block) sizes of a lowered kernel as text, x/y/z."""
    launch = func.attrs.get("gpu.launch", {})

    def dims(prefix):
        return [str(launch.get(f"{prefix}.{axis}", 1)) for axis in "xyz"]

    return dims("blockIdx"), dims("threadIdx")


def threads_per_block(func) -> int:
    launch = func.attrs.get("gpu.launch", {})
    total = 1
    for axis in "xyz":
        extent = launch.get(f"threadIdx.{axis}")
        total *= extent.value if extent is not None else 1
    return total


class CudaRenderer(MmaMixin, CudaVectors, GpuRenderer):
    """CUDA C for NVRTC / nvcc; tensor-core fragments and mma.sync (schedlab/backend/gpu/mma.py)."""

    dialect = "CUDA"
    supports_mma = True
    preamble = _CUDA_PREAMBLE
    kernel_prefix = 'extern "C" __global__ '
    restrict = "__restrict__"
    shared_qualifier = "__shared__ "
    helper_qualifier = "static __device__ inline"
    barrier_call = "__syncthreads()"
    unroll_pragma = "#pragma unroll"
    thread_index = {f"{kind}.{axis}": f"{kind}.{axis}" for kind in ("blockIdx", "threadIdx")
                    for axis in "xyz"}  # fmt: skip
    reserved_words = C_KEYWORDS | C_LIBRARY | CPP_KEYWORDS | CUDA_NAMES
    half_type = "__half"
    half_headers = ("<cuda_fp16.h>",)

    def local_array(self, ctype: str, name: str, count: int, buffer) -> str:
        text = super().local_array(ctype, name, count, buffer)
        if id(buffer.data) in self._vector_buffers:  # vector loads/stores need 16 bytes
            return text.replace(f"{ctype} {name}[", f"{ctype} __align__(16) {name}[", 1)
        return text

    def half_to_float(self, text: str) -> str:
        return f"__half2float({text})"

    def float_to_half(self, text: str) -> str:
        return f"__float2half_rn({text})"

    def shuffle_down(self, value: str, offset: str, width: str) -> str:
        return f"__shfl_down_sync(0xffffffffu, {value}, {offset}, {width})"

    @property
    def return_type(self) -> str:  # TVM's form: `__global__ void __launch_bounds__(N) f(...)`
        return f"void __launch_bounds__({threads_per_block(self.func)})"


class HipRenderer(CudaRenderer):
    """HIP C++ for hipcc / hipRTC: CUDA's tokens with HIP's header."""

    dialect = "HIP"
    supports_mma = False  # AMD's matrix cores are not mma.sync
    headers = ("<hip/hip_runtime.h>",)
    half_headers = ("<hip/hip_fp16.h>",)
    preamble = _CUDA_PREAMBLE.replace("__CUDACC_RTC__", "__HIPCC_RTC__").replace(
        "#define INFINITY", "#undef INFINITY\n#define INFINITY"
    )

    def shuffle_down(self, value: str, offset: str, width: str) -> str:
        return f"__shfl_down({value}, {offset}, {width})"  # HIP's: no mask, wavefront-wide


class OpenCLRenderer(OpenCLVectors, GpuRenderer):
    """OpenCL C 1.2 (PoCL, vendor drivers; the Adreno backend)."""

    dialect = "OpenCL"
    preamble = _OPENCL_PREAMBLE
    kernel_prefix = "__kernel "
    buffer_qualifier = "__global "
    restrict = "restrict"
    shared_qualifier = "__local "
    barrier_call = "barrier(CLK_LOCAL_MEM_FENCE)"
    unroll_pragma = "__attribute__((opencl_unroll_hint))"
    thread_index = {
        **{f"blockIdx.{a}": f"get_group_id({i})" for i, a in enumerate("xyz")},
        **{f"threadIdx.{a}": f"get_local_id({i})" for i, a in enumerate("xyz")},
    }
    reserved_words = C_KEYWORDS | C_LIBRARY | OPENCL_NAMES
    half_type = "half"
    half_pragma = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable"
    storage_types = {**CFamilyRenderer.storage_types, "float16": "half"}
    prelude_overrides = {"f16": _OPENCL_ROUND_F16}

    def native_half_on(self, target) -> bool:
        """Half arithmetic needs cl_khr_fp16: Adreno has it; a generic OpenCL device (PoCL,
        Oclgrind) is not assumed to, unless the target says `fp16=True`."""
        attrs = getattr(target, "attrs", {}) or {}
        return bool(attrs.get("fp16", getattr(target, "kind", "") == "adreno"))

    # -- float16 without cl_khr_fp16: `half` only in memory, through vload_half/vstore_half --
    def _carried(self, dtype) -> bool:
        return not self.native_half and is_f16(dtype) and dtype.lanes == 1

    def scratch_ctype(self, dtype) -> str:
        return "float" if self._carried(dtype) else super().scratch_ctype(dtype)

    def buffer_ref(self, buffer) -> str:
        if self._carried(buffer.dtype):
            return self.names.lookup(buffer.data) or super().buffer_ref(buffer)
        return super().buffer_ref(buffer)

    def _half_memory(self, buffer) -> bool:
        return self._carried(buffer.dtype) and self._ptr_types.get(id(buffer.data)) == "half"

    def _e_BufferLoad(self, node):
        if self._carried(node.buffer.dtype):
            index = self.expr(self.buffer_index(node))
            if self._half_memory(node.buffer):
                return f"vload_half({index}, {self.buffer_ref(node.buffer)})", ATOM
            return f"{self.buffer_ref(node.buffer)}[{index}]", ATOM  # a float scratch array
        return super()._e_BufferLoad(node)

    def _stored(self, dtype, value) -> str:
        if self._carried(dtype):  # already rounded: every float16 operation is
            return self.expr(value)
        return super()._stored(dtype, value)

    def _s_BufferStore(self, node: S.BufferStore) -> None:
        if self._half_memory(node.buffer) and node.value.dtype.lanes == 1:
            index = self.expr(self.buffer_index(node))
            value = self.expr(node.value)
            self.emit(f"vstore_half_rte({value}, {index}, {self.buffer_ref(node.buffer)});")
            return
        super()._s_BufferStore(node)

    def loop_style(self, loop: S.For):
        style, pragmas, note = super().loop_style(loop)
        if style == "unroll":  # the hint is an attribute before the loop, not a pragma line
            return style, [], note
        return style, pragmas, note

    def render(self, mod) -> RenderedModule:
        rendered = super().render(mod)
        # the shared prelude's sigmoid helper calls C's expf, which OpenCL C does not have
        rendered.source = rendered.source.replace("(1.0f + expf(-x))", "(1.0f + exp(-x))")
        return rendered

    def math_function(self, name: str, dtype) -> str:
        """OpenCL's math functions are overloaded by type: `exp`, not `expf`."""
        return {"nearbyint": "rint"}.get(name, name)

    def likely(self, condition: str) -> str:
        return condition


__all__ = ["GpuRenderer", "CudaRenderer", "HipRenderer", "OpenCLRenderer", "launch_dims",
           "threads_per_block"]  # fmt: skip
