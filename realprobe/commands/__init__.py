"""CLI command groups, one module per room; `realprobe.cli` registers them."""
