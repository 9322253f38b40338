"""marin: an open lab for foundation-model research. See DESIGN.md and docs/."""
