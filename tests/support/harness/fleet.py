"""The agent processes of one run: started, watched, killed and restarted by the harness."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.harness.config import Config

__all__ = ["Fleet", "Member"]

ROOT = Path(__file__).resolve().parents[3]


def _die_with_parent() -> None:
    # Linux: an agent must not outlive a harness killed outright (a CI timeout).
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # best effort
        pass


@dataclass
class Member:
    """One agent slot (``worker 2``, say) and the process now filling it."""

    role: str
    index: int
    incarnation: int = 0
    process: subprocess.Popen[bytes] | None = None
    #: Incarnations the harness killed on purpose, and ones that died on their own.
    killed: list[int] = field(default_factory=list)
    crashed: list[tuple[int, int]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}-{self.incarnation}"


class Fleet:
    """Every agent of a run, by role."""

    def __init__(self, config: Config, config_path: Path) -> None:
        self.config = config
        self.config_path = config_path
        self.members: list[Member] = []

    def add(self, role: str, count: int) -> list[Member]:
        added = [Member(role, index) for index in range(count)]
        self.members += added
        for member in added:
            self._spawn(member)
        return added

    def of(self, role: str) -> list[Member]:
        return [m for m in self.members if m.role == role]

    def _spawn(self, member: Member) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
        env.pop("DJANGO_SETTINGS_MODULE", None)
        errors = self.config.path("logs", f"{member.name}.stderr").open("ab")
        try:
            member.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.harness.agent",
                    member.role,
                    str(self.config_path),
                    str(member.index),
                    str(member.incarnation),
                ],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=errors,
                stderr=errors,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        finally:
            errors.close()

    def kill(self, member: Member) -> None:
        """SIGKILL the member's process and start its next incarnation."""
        assert member.process is not None
        member.process.kill()
        member.process.wait()
        member.killed.append(member.incarnation)
        member.incarnation += 1
        self._spawn(member)

    def watch(self) -> None:
        """Restart any worker or repairer that died on its own (and remember it)."""
        for member in self.members:
            process = member.process
            if process is None or process.poll() is None:
                continue
            if member.role == "producer" and process.returncode == 0:
                continue
            member.crashed.append((member.incarnation, process.returncode))
            if member.role == "producer":
                member.process = None  # a producer that crashed is not restarted
                continue
            member.incarnation += 1
            self._spawn(member)

    def producers_done(self) -> bool:
        return all(m.process is None or m.process.poll() is not None for m in self.of("producer"))

    def stop(self, roles: tuple[str, ...], timeout: float = 10.0) -> None:
        """Ask members of ``roles`` to stop (SIGTERM), then kill what still runs."""
        chosen = [m for m in self.members if m.role in roles and m.process is not None]
        for member in chosen:
            if member.process is not None and member.process.poll() is None:
                member.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for member in chosen:
            assert member.process is not None
            try:
                member.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                member.process.kill()
                member.process.wait()
            code = member.process.returncode
            if code not in (0, -signal.SIGTERM, -signal.SIGKILL):
                member.crashed.append((member.incarnation, code))

    def kill_all(self) -> None:
        for member in self.members:
            if member.process is not None and member.process.poll() is None:
                member.process.kill()
                member.process.wait()
