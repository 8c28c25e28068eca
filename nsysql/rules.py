"""Constants that more than one part of nsysql applies, defined once.

The rules that SQL applies (the numbered-family name of a range, memcpy directions) are DuckDB macros in
queries/v1/canonical/00_macros.sql; Python asks them through a query rather than keeping a copy.
"""

MAD_SIGMA = 1.4826
"""1.4826 x MAD (median absolute deviation) estimates the standard deviation of normal noise robustly."""
