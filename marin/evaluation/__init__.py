"""Evaluation steps: held-out loss and bits-per-byte of checkpoints, and scaling-law forecasts."""
