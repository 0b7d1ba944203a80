"""Context sources: each gathers context items with provenance for a card and stage (I/O)."""
