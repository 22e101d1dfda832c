"""The demo project's own pages and settings: its favicon, and schedules named as they fire."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

from django.test import Client

from django_ledger.core.schedule import Cron, Every, Timing

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3600


def test_the_favicon_is_an_icon_not_a_404(client: Client) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    assert "max-age" in response["Cache-Control"]
    body = b"".join(response) if response.streaming else response.content
    # An ICO of one image (reserved 0, type 1, count 1) whose image is a PNG (allowed
    # since Windows Vista, read by every browser).
    reserved, kind, count = struct.unpack("<HHH", body[:6])
    assert (reserved, kind, count) == (0, 1, 1)
    width, height, _, _, _, _, size, offset = struct.unpack("<BBBBHHII", body[6:22])
    assert (width, height) == (32, 32) and offset + size == len(body)
    png = body[offset:]
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (32, 32)
    # Its pixels decode: the IDAT chunk inflates to 32 rows of a filter byte and 32 RGBA.
    idat = png.index(b"IDAT")
    (length,) = struct.unpack(">I", png[idat - 4 : idat])
    assert len(zlib.decompress(png[idat + 4 : idat + 4 + length])) == 32 * (1 + 32 * 4)


def demo_schedules() -> dict[str, dict[str, object]]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    env.update(LEDGER_DEMO="1", DJANGO_SETTINGS_MODULE="testproject.settings")
    env.setdefault("REDIS_URL", "redis://127.0.0.1:1/0")  # read, never reached
    code = "import json; from django.conf import settings; print(json.dumps(settings.LEDGER['SCHEDULES']))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    schedules: dict[str, dict[str, object]] = json.loads(done.stdout)
    return schedules


def fires_in_an_hour(timing: Timing, start: int = 1_767_225_600) -> int:  # 2026-01-01 UTC
    count, moment = 0, start - 1
    while (moment := timing.next_after(moment) or start + HOUR) < start + HOUR:
        count += 1
    return count


def test_the_demo_schedules_fire_as_their_names_say() -> None:
    per_hour = {"hourly": 1, "minute": 60}
    crons = 0
    for name, config in demo_schedules().items():
        if "CRON" in config:
            timing: Timing = Cron(str(config["CRON"]))
            crons += 1
        else:
            timing = Every.of(float(str(config["EVERY"])))
        for word, count in per_hour.items():
            if word in name:
                assert fires_in_an_hour(timing) == count, (name, config)
    assert crons  # the Schedules page shows a cron schedule too


def test_the_readme_says_what_django_52_users_add() -> None:
    readme = (ROOT / "README.md").read_text()
    install = readme.split("## Install in your project", 1)[1].split("\n## ", 1)[0]
    assert "pip install 'django-task-ledger[tasks]'" in install and "Django 5.2" in install
    assert '"django_tasks"' in install
