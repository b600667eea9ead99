"""Run the pipeline on a cluster: `spark-submit analytics/spark_submit_driver.py all --log-dirs ...`.

Same arguments as `python -m kcoord.analytics`, except that the master and Spark settings come from
spark-submit (`--master`, `--conf`, `--driver-memory`); `--master` here is ignored.

What a cluster run needs:
- Ship the environment to the executors, since they decode segments in Python (numpy, pyarrow,
  cramjam, google-crc32c and this package): pack a virtualenv (venv-pack) or conda env and pass
  `--archives kcoord-env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python`
  (and `spark.pyspark.driver.python` for client mode), or install the kcoord wheel on every node.
  For the package code alone, `--py-files kcoord.zip` also works.
- Keep the input on storage every executor can read under the same path (NFS, a mounted
  object store, ...): the data source opens the segment files itself, it does not go through
  Hadoop's FileSystem; the `--out` directory must be writable by the executors as well.
- Running spark-submit from a virtualenv needs that venv's bin/ on PATH (its find-spark-home calls
  `python3`).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "src"))  # the checkout's src/, where kcoord is

from kcoord.analytics.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], under_spark_submit=True))
