"""hicache_contracts: the contract as types, and the suites that check it."""
