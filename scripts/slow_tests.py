"""Rewrite tests/support/slow_tests.txt from a pytest run's ``--durations=0`` output.

    pytest -n 4 --durations=0 > run.log; python scripts/slow_tests.py run.log

The suite starts its slowest tests first (tests/support/slow_first.py), so that under
pytest-xdist the last minutes are not one worker finishing a long process test alone.
A test kept here takes at least ``MIN_SECONDS`` (setup, call and teardown together).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

MIN_SECONDS = 2.0
LIST = Path(__file__).resolve().parent.parent / "tests" / "support" / "slow_tests.txt"
LINE = re.compile(r"\s*([\d.]+)s (?:call|setup|teardown)\s+(\S+)")


def main(log: str) -> None:
    text = Path(log).read_text()
    seconds: Counter[str] = Counter()
    for line in text.split("slowest durations", 1)[-1].splitlines():
        found = LINE.match(line)
        if found:
            seconds[found.group(2)] += float(found.group(1))
    slow = [(s, node) for node, s in seconds.items() if s >= MIN_SECONDS]
    slow.sort(key=lambda pair: (-pair[0], pair[1]))
    head = "# seconds, test: the suite's slowest tests, started first (scripts/slow_tests.py)\n"
    LIST.write_text(head + "".join(f"{s:.1f} {node}\n" for s, node in slow))
    print(f"{len(slow)} tests of {MIN_SECONDS} s or more -> {LIST}")


if __name__ == "__main__":
    main(sys.argv[1])
