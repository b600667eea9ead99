"""Crash-test child: append durably from many concurrent tasks, print each acknowledged append.

Usage: python crash_appender.py LOG_DIR RUN_ID. Every line on stdout is "<offset> <payload hex>"
and is written only after append_durable returned, i.e. after the fsync covering it. The parent
kills this process with SIGKILL at a random moment.
"""
import asyncio
import os
import sys

from protocol.records import build_batch
from storage import LogConfig, LogManager

APPENDERS = 64


async def appender(log, run_id: str, task: int) -> None:
    n = 0
    while True:
        n += 1
        payload = f"{run_id}/{task}/{n}/".encode() + os.urandom(8).hex().encode() * (n % 5)
        info = await log.append_durable(build_batch([(b"key%d" % task, payload)]))
        os.write(1, b"%d %s\n" % (info.base_offset, payload.hex().encode()))


async def main(log_dir: str, run_id: str) -> None:
    manager = LogManager(log_dir, LogConfig(segment_bytes=32 * 1024))
    log = manager.get_or_create("crash", 0)
    os.write(1, b"ready %d\n" % log.log_end_offset)
    await asyncio.gather(*(appender(log, run_id, t) for t in range(APPENDERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
