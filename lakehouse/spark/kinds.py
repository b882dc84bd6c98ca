"""Classic and Spark Connect DataFrames side by side.

PySpark builds columns and UDFs of the kind the *process* is in (``SPARK_CONNECT_MODE_ENABLED``,
set when the first Connect session starts), not of the DataFrame they are used with. A process
holding both kinds of session (a local session and a Connect client, as the test suite does)
asks here for the functions and UDFs of a DataFrame's own kind.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as classic_functions
from pyspark.sql.types import DataType
from pyspark.sql.udf import _create_udf as create_classic_udf
from pyspark.util import PythonEvalType


def is_connect(df: DataFrame | SparkSession | Column) -> bool:
    """Whether ``df`` is a Spark Connect DataFrame, session or Column (asked without importing the
    Connect client, which Python workers never need and which costs them half a second)."""
    return type(df).__module__.startswith("pyspark.sql.connect.")


def functions_for(df: DataFrame | SparkSession) -> ModuleType:
    """``pyspark.sql.functions`` of the kind of ``df`` (a DataFrame or a session)."""
    if is_connect(df):
        from pyspark.sql.connect import functions as connect_functions

        return connect_functions
    return classic_functions


def arrow_udf_for(df: DataFrame, f: Callable, return_type: DataType) -> Callable:
    """A scalar Arrow UDF (``pa.Array`` columns in, a ``pa.Array`` out) usable on ``df``."""
    if is_connect(df):
        from pyspark.sql.connect.udf import _create_udf as create_connect_udf

        return create_connect_udf(f, return_type, PythonEvalType.SQL_SCALAR_ARROW_UDF)
    return create_classic_udf(f, return_type, PythonEvalType.SQL_SCALAR_ARROW_UDF)
