"""Graph passes (TVM's relax.transform): each is a pass factory returning a module pass that
runs through the shared pass infrastructure (`schedlab.ir.transform`: Sequential, PassContext,
PassRecorder).

    mod = Sequential([LegalizeOps(), AnnotateTIROpPattern(), FoldConstant(),
                      DeadCodeElimination(), CanonicalizeBindings(), FuseOps(), FuseTIR(),
                      DeadCodeElimination(), ToNonDataflow()])(mod)
"""

from .annotate_tir_op_pattern import AnnotateTIROpPattern, analyze_op_pattern
from .call_tir_rewrite import CallTIRRewrite
from .canonicalize_bindings import CanonicalizeBindings
from .concat_in_place import PlanConcatInPlace
from .convert_blocked_layout import ConvertToBlockedLayout
from .dead_code_elimination import DeadCodeElimination
from .fold_constant import FoldConstant
from .fold_layout_rewrite import AttachLayoutFreeBuffers, FoldLayoutRewrite
from .fuse_ops import FuseOps
from .fuse_tir import FuseTIR, FuseTIRError
from .legalize_ops import LegalizeOps, legalize_call
from .normalize import Normalize, normalize_function
from .static_plan_block_memory import StaticPlanBlockMemory
from .to_non_dataflow import ToNonDataflow

__all__ = [
    "AnnotateTIROpPattern", "analyze_op_pattern", "AttachLayoutFreeBuffers",
    "CanonicalizeBindings", "ConvertToBlockedLayout", "DeadCodeElimination", "FoldConstant",
    "FoldLayoutRewrite",
    "FuseOps", "FuseTIR", "FuseTIRError", "LegalizeOps",
    "legalize_call", "ToNonDataflow", "CallTIRRewrite", "PlanConcatInPlace",
    "StaticPlanBlockMemory", "Normalize", "normalize_function",
]  # fmt: skip
