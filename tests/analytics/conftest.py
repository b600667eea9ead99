"""One SparkSession (local[2]) for the whole analytics test session: JVM start is the fixed cost."""
import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from kcoord.analytics import session

    spark = session.get_or_create("local[2]", progress=False, app_name="kcoord-analytics-tests",
                                  conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                        "spark.default.parallelism": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()
