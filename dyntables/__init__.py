"""dyntables: Dynamic Tables for Apache Spark on Iceberg."""

from dyntables.errors import DynTablesError
from dyntables.lakehouse import Lakehouse

__version__ = "0.1.0"
__all__ = ["DynTablesError", "Lakehouse", "__version__"]
