"""Config values in records: `marin.config.values`, re-exported for the callers that name it here."""

from __future__ import annotations

from marin.config.values import TAGS, ConfigValueError, build, decode, encode

__all__ = ["TAGS", "ConfigValueError", "build", "decode", "encode"]
