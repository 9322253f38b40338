"""marin: an open lab for foundation-model research. See docs/design.md and the other docs/*.md."""
