"""The HTTP load generator: wrk (Debian package `wrk`), installed on first use when missing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_APT_TIMEOUT_S = 600
# apt-get waits this long for a lock held by another installer instead of failing at once.
_APT_LOCK_WAIT = ["-o", "DPkg::Lock::Timeout=120"]


class WrkUnavailable(RuntimeError):
    pass


def ensure_wrk() -> str:
    """Path of the wrk binary; installs the Debian package when it is missing and we are root."""
    found = shutil.which("wrk")
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise WrkUnavailable("wrk is not installed: run `sudo apt-get install -y wrk`")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", *_APT_LOCK_WAIT, "install", "-y", "-q", "wrk"]
    print("bench: wrk is missing, installing the Debian package ...", flush=True)
    done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=_APT_TIMEOUT_S)
    if done.returncode != 0:
        # A fresh machine may have empty package lists.
        subprocess.run(
            ["apt-get", *_APT_LOCK_WAIT, "update", "-q"],
            env=env,
            capture_output=True,
            timeout=_APT_TIMEOUT_S,
        )
        done = subprocess.run(
            install, env=env, capture_output=True, text=True, timeout=_APT_TIMEOUT_S
        )
    found = shutil.which("wrk")
    if done.returncode != 0 or not found:
        raise WrkUnavailable(f"apt-get install wrk failed: {done.stderr.strip()[-500:]}")
    return found


@dataclass(frozen=True)
class WrkRun:
    requests: int
    seconds: float
    rps: float
    p50_us: float
    p99_us: float
    non_2xx: int
    socket_errors: int
    output: str


def post_script(body: object) -> str:
    """A wrk Lua script sending `body` as JSON with POST."""
    text = json.dumps(body, separators=(",", ":"))
    # A Lua long bracket takes the JSON verbatim; pick a level the body cannot close early.
    level = "="
    while f"]{level}]" in text:
        level += "="
    return (
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f"wrk.body = [{level}[{text}]{level}]\n"
    )


_UNIT_US = {"us": 1.0, "ms": 1_000.0, "s": 1_000_000.0, "m": 60_000_000.0, "h": 3_600_000_000.0}
_DURATION_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _to_us(value: str, unit: str) -> float:
    return float(value) * _UNIT_US[unit]


def parse(output: str) -> WrkRun:
    """Figures of wrk 4's text report (run with --latency)."""
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.M)
    total = re.search(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h),", output, re.M)
    pct = {p: re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s|m|h)\s*$", output, re.M) for p in (50, 99)}
    if not (rps and total and pct[50] and pct[99]):
        raise ValueError(f"unexpected wrk output:\n{output}")
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    sockets = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    return WrkRun(
        requests=int(total.group(1)),
        seconds=float(total.group(2)) * _DURATION_S[total.group(3)],
        rps=float(rps.group(1)),
        p50_us=_to_us(pct[50].group(1), pct[50].group(2)),
        p99_us=_to_us(pct[99].group(1), pct[99].group(2)),
        non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        socket_errors=sum(int(n) for n in sockets.groups()) if sockets else 0,
        output=output,
    )


def run(url: str, body: object, *, duration_s: float, threads: int, connections: int) -> WrkRun:
    """POST `body` to `url` for `duration_s` with wrk and return its figures."""
    if not url.startswith("http://127.0.0.1:"):
        raise ValueError(f"the benchmarks only load loopback, not {url}")
    wrk = ensure_wrk()
    with tempfile.TemporaryDirectory(prefix="calcgraph-wrk-") as tmp:
        script = Path(tmp) / "post.lua"
        script.write_text(post_script(body))
        seconds = max(1, round(duration_s))
        command = [
            wrk,
            f"--threads={threads}",
            f"--connections={connections}",
            f"--duration={seconds}s",
            "--timeout=5s",
            "--latency",
            f"--script={script}",
            url,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
    return parse(done.stdout)
