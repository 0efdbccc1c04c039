"""The recall service: the only read door (session search, history, memory files, recall)."""
