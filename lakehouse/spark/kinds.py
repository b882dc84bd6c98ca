"""Classic and Spark Connect DataFrames side by side.

PySpark builds columns and UDFs of the kind the *process* is in (``SPARK_CONNECT_MODE_ENABLED``,
set when the first Connect session starts), not of the DataFrame they are used with. A process
holding both kinds of session (a local session and a Connect client, as the test suite does)
asks here for the functions and UDFs of a DataFrame's own kind.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from pyspark.sql import DataFrame
from pyspark.sql import functions as classic_functions
from pyspark.sql.connect import functions as connect_functions
from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
from pyspark.sql.connect.udf import _create_udf as create_connect_udf
from pyspark.sql.types import DataType
from pyspark.sql.udf import _create_udf as create_classic_udf
from pyspark.util import PythonEvalType


def functions_for(df: DataFrame) -> ModuleType:
    """``pyspark.sql.functions`` of ``df``'s kind."""
    return connect_functions if isinstance(df, ConnectDataFrame) else classic_functions


def arrow_udf_for(df: DataFrame, f: Callable, return_type: DataType) -> Callable:
    """A scalar Arrow UDF (``pa.Array`` columns in, a ``pa.Array`` out) usable on ``df``."""
    create = create_connect_udf if isinstance(df, ConnectDataFrame) else create_classic_udf
    return create(f, return_type, PythonEvalType.SQL_SCALAR_ARROW_UDF)
