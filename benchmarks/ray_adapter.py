"""Adapter for benchmarks/executor_harness/marin_baseline.py: this project's executor with the Ray backend.

It is benchmarks/executor_harness/ours_adapter.py (the local backend) with `backend="ray"`: a local Ray
cluster is started in each measured process, and its start-up is part of the timed run.
"""

from __future__ import annotations

import functools
import importlib.util
import os

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "executor_harness", "ours_adapter.py")
_spec = importlib.util.spec_from_file_location("ours_adapter", _path)
_ours = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ours)

NAME = "ours-ray"
import_api, describe, set_log_level = _ours.import_api, _ours.describe, _ours.set_log_level
plan = functools.partial(_ours.plan, backend="ray")
dry_run = functools.partial(_ours.dry_run, backend="ray")
run = functools.partial(_ours.run, backend="ray")
