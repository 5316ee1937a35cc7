"""schedlab.cost: the analytical latency model (`predict`) and its benchmark against
measurements (`benchmark.run_cost_bench`, the `schedlab bench-cost` command)."""

from .predict import NestPrediction, Prediction, predict
from .spearman import spearman

__all__ = ["predict", "Prediction", "NestPrediction", "spearman"]
