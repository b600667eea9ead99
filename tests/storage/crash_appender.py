"""Crash-test child: append durably from many concurrent tasks, print each acknowledged append.

Usage: python crash_appender.py LOG_DIR RUN_ID [compact | maintain]. Every line on stdout is
"<offset> <payload hex>" and is written only after append_durable returned, i.e. after the fsync
covering it. With "compact", the topic is compacted continuously in a worker thread meanwhile
(a line "compacted <n>" after each clean). With "maintain", the log manager's maintenance runs
every few ms, rewriting the recovery-point checkpoint as the appends move it. The parent kills this
process with SIGKILL at a random moment.
"""
import asyncio
import os
import sys

from kcoord.protocol.records import build_batch
from kcoord.storage import LogConfig, LogManager

APPENDERS = 64


def config(compact: bool) -> LogConfig:
    if compact:
        return LogConfig(segment_bytes=8 * 1024, cleanup_policy="compact", min_cleanable_dirty_ratio=0.01)
    return LogConfig(segment_bytes=32 * 1024)


async def appender(log, run_id: str, task: int) -> None:
    n = 0
    while True:
        n += 1
        payload = f"{run_id}/{task}/{n}/".encode() + os.urandom(8).hex().encode() * (n % 5)
        info = await log.append_durable(build_batch([(b"key%d" % task, payload)]))
        os.write(1, b"%d %s\n" % (info.base_offset, payload.hex().encode()))


async def compactor(log) -> None:
    cleans = 0
    while True:
        if log.needs_compaction():
            await log.compact_async()
            cleans += 1
            os.write(1, b"compacted %d\n" % cleans)
        else:
            await asyncio.sleep(0.005)


async def main(log_dir: str, run_id: str, mode: str) -> None:
    compact = mode == "compact"
    manager = LogManager(log_dir, config(compact))
    if mode == "maintain":
        manager.start_maintenance(interval_s=0.005)
    log = manager.get_or_create("crash", 0)
    os.write(1, b"ready %d\n" % log.log_end_offset)
    tasks = [appender(log, run_id, t) for t in range(APPENDERS)]
    if compact:
        tasks.append(compactor(log))
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""))
