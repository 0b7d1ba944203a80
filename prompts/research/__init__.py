"""Research over large artifacts, the pure part: chunking a buffer on line boundaries,
reading analysts' findings leniently, merging and grouping them, and rendering the
synthesizer's input with the findings as data inside <findings> tags.

    chunks.py     token-bounded chunks on line boundaries with a small overlap
    findings.py   the analyst's JSON shape, lenient parsing, dedupe with frequency, ordering
    synthesis.py  the synthesizer's user turn, window fitting and grouping by theme/locality
"""
