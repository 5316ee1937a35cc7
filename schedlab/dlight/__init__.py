"""`schedlab.dlight`: default schedules from rule classes, in the shape of TVM's Dlight.

    from schedlab import dlight
    mod = dlight.ApplyDefaultSchedule(*dlight.cpu.default_rules())(mod)

Each root block of each PrimFunc not marked "tir.is_scheduled" gets the first rule that matches
it; the result is marked scheduled and its attr "dlight.rules" names the rule per block.
Extensions add rules with `register_rule` (entry-point group `schedlab.schedule_rules`)."""

from . import cpu, gpu
from .analysis import BlockInfo, GemmAxes, block_info, dense_suffix, gemm_axes
from .base import (
    RULES_ATTR,
    SCHEDULED_ATTR,
    ApplyDefaultSchedule,
    ScheduleRule,
    is_scheduled,
    rules_of,
    schedule_func,
)
from .registry import register_rule, registered_rules, unregister_rule

__all__ = [
    "RULES_ATTR", "SCHEDULED_ATTR", "ApplyDefaultSchedule", "BlockInfo", "GemmAxes",
    "ScheduleRule", "block_info", "cpu", "dense_suffix", "gemm_axes", "gpu", "is_scheduled",
    "register_rule", "registered_rules", "rules_of", "schedule_func", "unregister_rule",
]  # fmt: skip
