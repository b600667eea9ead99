"""analytics: the PySpark pipeline over the store's segments — tables (Parquet) and an HTML report.

May import: protocol, storage. Nothing imports analytics.
"""
