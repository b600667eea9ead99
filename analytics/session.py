"""Creating the SparkSession the pipeline runs in, locally or under spark-submit."""
import os
import pathlib
import sys

import kcoord

ROOT = str(pathlib.Path(kcoord.__file__).resolve().parent.parent)  # where `kcoord` is imported from (src/ or site-packages)


def prepare_environment():
    """Workers must run this interpreter and import this package.

    In a plain `python` run, executors start `$PYSPARK_PYTHON` (default `python3`), not
    sys.executable, and read the variable before the JVM starts; so set both here, first.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    path = os.environ.get("PYTHONPATH", "")
    if ROOT not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, path) if p)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def ship_package(spark):
    """Under spark-submit, executors may not have this package installed: send it as a py-file."""
    import shutil
    import tempfile

    base = os.path.join(tempfile.mkdtemp(prefix="kcoord-analytics-"), "kcoord")
    path = shutil.make_archive(base, "zip", ROOT, "kcoord")
    spark.sparkContext.addPyFile(path)


def get_or_create(master=None, progress=True, app_name="kcoord-analytics", conf=None):
    """master None: take it from spark-submit (cluster runs); else e.g. "local[*]"."""
    from pyspark.sql import SparkSession

    from kcoord.analytics.source import KcoordLogSource

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        prepare_environment()
        builder = builder.master(master).config("spark.sql.shuffle.partitions", "16")
    from kcoord.analytics.segment import CHUNK_RECORDS

    settings = {"spark.sql.session.timeZone": "UTC",
                # Let the data source's Arrow batches through whole (the default re-slices at 10k rows).
                "spark.sql.execution.arrow.maxRecordsPerBatch": str(CHUNK_RECORDS),
                "spark.ui.showConsoleProgress": str(bool(progress)).lower(),
                **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if master is None:
        ship_package(spark)
    spark.dataSource.register(KcoordLogSource)
    return spark
