"""Target: the host description read from the OS, overrides, GPU defaults, JSON round trip."""

import json
import os
import pickle
import platform

import pytest

import schedlab
from schedlab.target import CPU_PRESETS, GPU_PRESETS, KINDS, Target


def test_cpu_describes_this_host():
    target = Target("cpu")
    assert target.kind == "cpu" and target.keys == ("cpu",) and not target.is_gpu
    assert target.num_cores == len(os.sched_getaffinity(0))
    assert 1 <= target.physical_cores <= target.num_cores
    assert target.arch == platform.machine()
    flags = open("/proc/cpuinfo").read()
    expected_width = 512 if " avx512f" in flags else 256 if " avx2" in flags else 128
    assert target.simd_width == expected_width
    assert target.l1d_bytes >= 8 * 1024 and target.l2_bytes >= target.l1d_bytes
    assert target.l3_bytes >= 0 and target.cache_line_bytes in (32, 64, 128, 256)
    assert 0.1 < target.clock_ghz < 10
    assert target.fma_units in (1, 2) and target.mem_bandwidth_gbs > 0


def test_peak_flops_formula():
    t = Target("cpu")
    per_lane = t.num_cores * t.clock_ghz * t.fma_units * 2
    lanes = min(t.simd_width, t.simd_datapath_bits)  # Zen 4 runs 512-bit ops in two halves
    assert t.peak_gflops["float32"] == pytest.approx(per_lane * lanes / 32, rel=1e-3)
    assert t.peak_gflops["float64"] == pytest.approx(per_lane * lanes / 64, rel=1e-3)
    assert t.peak_flops("float32") == pytest.approx(t.peak_gflops["float32"] * 1e9)
    with pytest.raises(ValueError, match="no estimate for dtype"):
        t.peak_flops("complex64")


def test_aliases_and_overrides():
    assert Target("llvm") == Target("c") == Target("cpu")
    four = Target("cpu", num_cores=4)
    assert four.num_cores == 4
    base = Target("cpu")
    assert four.peak_gflops["float32"] == pytest.approx(
        base.peak_gflops["float32"] * 4 / base.num_cores, rel=1e-2
    )
    assert Target(four, simd_width=128).num_cores == 4
    assert Target({"kind": "cpu", "num_cores": 3}).num_cores == 3
    pinned = Target("cpu", peak_gflops={"float32": 1.0})
    assert Target(pinned, num_cores=8).peak_gflops == {"float32": 1.0}


def test_json_and_str_round_trip():
    for target in (Target("cpu", num_cores=3, cflags=["-DX"]), Target("cuda"), Target("adreno")):
        assert Target(str(target)) == target
        assert Target.from_json(target.to_json()) == target
        assert json.loads(str(target))["kind"] == target.kind
        assert pickle.loads(pickle.dumps(target)) == target
        assert hash(Target(str(target))) == hash(target)


@pytest.mark.parametrize("kind", ["cuda", "rocm", "opencl", "adreno"])
def test_gpu_kinds_describe_defaults(kind):
    target = Target(kind)
    assert target.kind == kind and target.is_gpu and "gpu" in target.keys
    assert target.max_threads_per_block >= 256 and target.warp_size >= 1
    assert target.max_shared_memory_per_block > 0 and target.peak_gflops["float32"] > 0
    assert target.as_dict()["kind"] == kind


def test_errors_list_what_is_valid():
    with pytest.raises(ValueError, match="unknown kind 'metal'; valid kinds: .*cpu.*cuda"):
        Target("metal")
    with pytest.raises(ValueError, match="unknown attribute.*bogus; known: .*num_cores"):
        Target("cpu", bogus=1)
    with pytest.raises(ValueError, match="pass attributes as keywords"):
        Target("llvm -num-cores 4")
    with pytest.raises(AttributeError, match="immutable"):
        Target("cpu").kind = "cuda"
    assert set(KINDS) == {"cpu", "cuda", "rocm", "opencl", "adreno"}


def test_current_target_context():
    assert Target.current() is None
    with Target("cuda") as outer:
        with Target("cpu", num_cores=1) as inner:
            assert Target.current() is inner
        assert Target.current() is outer
    assert Target.current() is None


def test_lazy_top_level_name():
    assert schedlab.Target is Target


@pytest.mark.parametrize("name", sorted(CPU_PRESETS))
def test_cpu_presets_describe_their_machine_and_round_trip(name):
    target = Target(name)
    assert target.kind == "cpu" and "(preset)" in target.model
    assert target.num_cores == Target("cpu").num_cores  # the host's, unless given
    assert Target(name, num_cores=8).num_cores == 8
    assert Target(str(target)) == target and Target(target.to_json()) == target
    assert "preset" in target.describe()


def test_preset_tiles_follow_the_preset_not_the_host():
    from schedlab.dlight.cpu._common import vector_lanes, vector_registers
    from schedlab.ir.dtype import DataType

    f32 = DataType("float32")
    assert vector_lanes(Target("zen5"), f32) == 16 and vector_registers(Target("zen5")) == 32
    assert vector_lanes(Target("zen3"), f32) == 8 and vector_registers(Target("zen3")) == 16
    assert vector_lanes(Target("neoverse-v2"), f32) == 4
    assert vector_registers(Target("neoverse-v2")) == 32
    assert Target("zen5").peak_flops() == pytest.approx(Target("zen5").num_cores * 268.8e9)


def test_foreign_architecture_preset_is_refused_at_build_with_a_clear_error():
    from schedlab import workloads
    from schedlab.errors import CompileError

    func, _ = workloads.get("gemm", M=4, N=4, K=4)
    foreign = "neoverse-v2" if platform.machine() != "aarch64" else "zen5"
    with pytest.raises(CompileError, match="kernels are built to run here"):
        schedlab.build(func, target=foreign)


def test_unknown_kind_lists_the_presets():
    presets = "CPU presets: zen3, zen4, zen5, skylake-avx512, neoverse-v2"
    with pytest.raises(ValueError, match=presets):
        Target("zen9")


@pytest.mark.parametrize("name", sorted(GPU_PRESETS))
def test_gpu_presets_describe_their_device_and_round_trip(name):
    target = Target(name)
    assert target.kind == GPU_PRESETS[name]["kind"] and target.is_gpu
    assert "(preset)" in target.model
    assert Target(str(target)) == target and pickle.loads(pickle.dumps(target)) == target
    assert target.warp_size in (32, 64)
    assert target.max_threads_per_block >= 256 and target.max_shared_memory_per_block >= 32768
    assert target.registers_per_sm > 0 and target.mem_bandwidth_gbs > 0
    assert target.peak_flops("float16") >= target.peak_flops("float32") > 0
    text = target.describe()
    assert text.startswith(f"{target.kind}: ") and "(preset)" in text
    assert "threads/block" in text and "KiB shared/block" in text and "TFLOP/s" in text


def test_gpu_presets_carry_data_sheet_figures():
    h100, h200, a100 = Target("h100"), Target("h200"), Target("a100")
    assert Target("sm_90") == h100 and Target("sm_80") == a100
    assert (h100.arch, h100.num_sms, h100.warp_size) == ("sm_90", 132, 32)
    assert h200.mem_bandwidth_gbs > h100.mem_bandwidth_gbs and h200.num_sms == 132
    assert h100.peak_gflops["float16"] == pytest.approx(989400.0)
    assert a100.peak_gflops["float32"] == pytest.approx(19500.0)
    mi300x, mi250 = Target("mi300x"), Target("mi250")
    assert Target("gfx942") == mi300x and Target("gfx90a") == mi250
    assert (mi300x.kind, mi300x.warp_size, mi300x.num_sms) == ("rocm", 64, 304)
    assert mi300x.describe().startswith("rocm: AMD Instinct MI300X (preset) gfx942, 304 CUs")
    adreno = Target("adreno750")
    assert adreno.kind == "adreno" and "opencl" in adreno.keys
    assert Target("adreno750").clock_ghz > Target("adreno740").clock_ghz
    # attributes still override, and the vendor's peak stays unless overridden too
    assert Target("h100", max_threads_per_block=512).max_threads_per_block == 512


def test_unknown_kind_lists_the_gpu_presets():
    with pytest.raises(ValueError, match="GPU presets: sm_90, h100, h200, sm_80, a100"):
        Target("sm_99")
