"""The replication runtime: flows running against real clusters (I/O lives here, not in the core)."""
