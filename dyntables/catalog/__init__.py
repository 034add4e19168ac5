"""Dynamic table definitions and state, kept in the Iceberg catalog."""
