"""Connectors: where a TableScan's splits come from and how they are read (Velox's Connector/DataSource)."""
