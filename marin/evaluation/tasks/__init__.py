"""lm-eval-harness tasks shipped with marin (YAML task configs with local data, see `build.py`)."""

from pathlib import Path

SHIPPED = str(Path(__file__).parent)
"""The folder marin's harness step always adds to lm-eval's task search path."""
