"""hicache_reference: the canonical controller and the reference backends."""
