"""The `cairn` operator command: migrations and stream setup (later: replay, import, bench)."""
