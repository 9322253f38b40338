"""The train step (Levanter `train_lm`) and its configs; `import marin.training` stays light."""

from marin.training.config import LlamaModelConfig, OptimizerConfig, TrainConfig

__all__ = ["LlamaModelConfig", "OptimizerConfig", "TrainConfig", "train"]


def train(config: TrainConfig) -> None:
    """Train the model of `config` (see `marin.training.train`)."""
    from marin.training.train import train as _train

    _train(config)
