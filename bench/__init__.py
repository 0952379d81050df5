"""Benchmark harness: time gpu_engine against DuckDB and Polars on TPC-H Parquet files."""
