"""Research over stored buffers without Temporal: the lexical (BM25) and regex index over a
card's chunks (index.py) and the synthesizer's tools over it (tools.py)."""
