"""The consolidation service: owns memory documents; writes reset snapshots, applies memory writes,
and records the memory flushes that compaction makes due."""
