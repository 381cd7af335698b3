"""The linker contract's executable side: CPU device pools, the per-release interface, the linker suite."""
