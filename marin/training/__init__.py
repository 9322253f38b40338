"""The train step (Levanter `train_lm`, see `marin.training.train`) and its configs.

`import marin.training` stays light: Levanter and jax load only when a step runs.
"""

from marin.training.config import LlamaModelConfig, OptimizerConfig, TrainConfig

__all__ = ["LlamaModelConfig", "OptimizerConfig", "TrainConfig"]
