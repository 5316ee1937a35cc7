"""AVX2 CPU target presets for schedlab ("haswell", "zen2"), a default-schedule rule written for
them (`BlockedTranspose`) and an explorer tab that predicts the open kernel on every CPU preset.

Everything plugs in through schedlab's entry points (pyproject.toml); nothing here is imported
by hand: `schedlab.Target("haswell")` loads the presets, `dlight.cpu.default_rules()` the rule,
the explorer the tab."""

__version__ = "0.1.0"
