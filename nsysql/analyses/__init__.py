"""Analyses: one module per question, each a thin wrapper around a SQL file of `queries/v1/analyses/`.

Every function takes a DuckDB connection holding the canonical tables and returns a polars DataFrame (or a
dict of them); none prints.
"""
