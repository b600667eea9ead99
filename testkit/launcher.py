"""A fork server for test brokers: one interpreter imports the broker once, then forks a child per
broker start, each serving as `kcoord serve` does (kcoord.broker.run.serve_properties, the command's own
implementation).

A fresh interpreter spends most of a test broker's start-up importing (~0.25 s of ~0.5 s measured on
2 shared cores, bench/fixture.py); a fork of one that has imported everything starts serving in
tens of milliseconds, and is still a process of its own: SIGKILL is a real crash, its memory is its
own. The launcher forks before any event loop or thread exists in it, so children start clean.

    launcher = Launcher()                              # python -m kcoord.testkit.launcher, in the background
    pid = launcher.spawn({"listeners": ..., "log.dirs": ...}, cwd, log_path, env={...})
    launcher.close()                                   # its brokers get SIGKILL with it (PR_SET_PDEATHSIG)

Protocol on the launcher's stdin / stdout: one JSON object a line each way.
"""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading

import kcoord

PR_SET_PDEATHSIG = 1
PACKAGE_ROOT = pathlib.Path(kcoord.__file__).resolve().parent.parent  # where this `kcoord` package is imported from


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a broker process: it imports the same `kcoord` package as this process (a
    checkout or an install)."""
    path = os.pathsep.join(p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", **(extra or {}))


class Launcher:
    """The test process's handle on a fork server."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._proc = subprocess.Popen([sys.executable, "-m", "kcoord.testkit.launcher"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env=child_env(env), text=True)
        self._lock = threading.Lock()

    def spawn(self, overrides: dict[str, str], cwd: str, log_path: str, env: dict[str, str] | None = None,
              log_level: str = "INFO", status_path: str | None = None) -> int:
        """Fork a broker serving with these properties (`kcoord serve --override k=v ...`) in `cwd`,
        stdout and stderr appended to `log_path`; its exit status is written to `status_path` as it exits
        (the kernel reaps it, so nobody else can tell)."""
        with self._lock:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the broker launcher exited ({self._proc.returncode})")
            request = {"overrides": overrides, "log_level": log_level, "cwd": cwd, "log": log_path,
                       "env": env or {}, "status": status_path}
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            answer = json.loads(self._proc.stdout.readline() or '{"error": "the launcher exited"}')
        if "pid" not in answer:
            raise RuntimeError(f"the broker launcher could not start a broker: {answer.get('error')}")
        return answer["pid"]

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()  # EOF: it exits, and its brokers with it
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        self._proc.stdout.close()


def _child(request: dict) -> None:
    """In the forked child: serve as `kcoord serve` does, never return."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _die_with_parent()
        os.chdir(request["cwd"])
        os.environ.update(request["env"])
        log_fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115  (fd 0 is the process's)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        from kcoord.broker.run import serve_properties

        code = serve_properties(None, request["overrides"], request["log_level"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # the child must never fall back into the launcher's loop
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            if request.get("status"):
                with open(request["status"], "w") as status:
                    status.write(str(code))
        finally:
            os._exit(code)


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the fixture's teardown stops its brokers anyway
        pass


def serve() -> None:
    """The launcher: import what a broker needs, then fork one per request line until stdin closes."""
    import kcoord.broker.app  # noqa: F401  (the point: imported once, before any fork)
    import kcoord.broker.run  # noqa: F401
    import kcoord.coordinator.runtime  # noqa: F401
    from kcoord.broker import registry

    try:
        import uvloop  # noqa: F401
    except ImportError:
        pass
    registry.load_all()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is for the brokers and the test run
    _die_with_parent()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            sys.stdout.flush()
            pid = os.fork()
        except (ValueError, OSError) as exc:
            print(json.dumps({"error": str(exc)}), flush=True)
            continue
        if pid == 0:
            _child(request)
        print(json.dumps({"pid": pid}), flush=True)


if __name__ == "__main__":
    serve()
