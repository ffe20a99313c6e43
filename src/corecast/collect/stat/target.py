"""What `corecast stat` monitors: a command it launches, a running process, or the system."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from ...errors import UserError
from ..perf import Launched, launch


# ============================================================================================
# the target

#: How long a command gets to end on SIGTERM (--duration) before SIGKILL.
STOP_GRACE_S = 2.0


class Target:
    """What is monitored: a command corecast launches, a running process, or the system."""

    def __init__(self, kind: str, pid: int = -1, argv: Sequence[str] | None = None,
                 child: Launched | None = None, env: dict[str, str] | None = None):
        self.env = env
        self.kind = kind            # command | pid | system
        self.pid = pid
        self.argv = list(argv or [])
        self.child = child
        self.pidfd: int | None = None
        self.exit_status: int | None = None

    @classmethod
    def command(cls, argv: Sequence[str], env: dict[str, str] | None = None) -> "Target":
        return cls("command", argv=argv, env=env)

    @classmethod
    def attach(cls, pid: int) -> "Target":
        if not Path(f"/proc/{pid}").is_dir():
            raise UserError(f"-p {pid}: no such process")
        return cls("pid", pid=pid)

    @classmethod
    def system(cls) -> "Target":
        return cls("system")

    def prepare(self) -> None:
        """Fork the command (stopped before exec)."""
        if self.kind == "command" and self.child is None:
            self.child = launch(self.argv, env=self.env)
            self.pid = self.child.pid
        if self.pid > 0:
            try:
                self.pidfd = os.pidfd_open(self.pid)
            except (OSError, AttributeError):
                self.pidfd = None

    def start(self) -> None:
        if self.child is not None and not self.child.started:
            self.child.start()

    def alive(self) -> bool:
        if self.kind == "system":
            return True
        if self.child is not None:
            return self.child.poll() is None
        return Path(f"/proc/{self.pid}").is_dir() and _not_zombie(self.pid)

    def finish(self) -> None:
        if self.child is not None:
            if self.child.started:
                self.exit_status = self.child.wait()
            else:
                self.child.abandon()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _not_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False
