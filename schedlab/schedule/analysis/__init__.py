"""Legality analyses used by the primitives (dependences, affine bindings, region cover, stage
pipeline, reduction blocks): facts about the IR, computed from a ScheduleState, never changing
it."""
