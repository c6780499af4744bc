#!/usr/bin/python3
"""The Python adapter's cost per execute of /bin/true over the C remote
adapter's, against the same `airlock serve` in one run.

It starts one service (native where this host can run it: root and the
default image; fake otherwise, or with --mechanism), provisions one sandbox
per client, and runs interleaved rounds (the side that goes first
alternates): ROUNDS rounds of EXECS executes each side. The C side is
bench_remote_exec (the remote adapter under the core, the worker's own
client), one process kept for the run; the Python side is
airlock.ServiceEnvironment in this process. It prints p50 and p99 of each
side and the ratio at p50, and asserts no time (the aim, under 1.3x, is
read from its output); it exits non-zero when any call failed.

  bench_python.py --airlock PATH --remote PATH [--rounds N] [--execs N]
                  [--mechanism fake|native] [--short]
"""

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import airlock  # noqa: E402
from tests import servers  # noqa: E402


def pct(v: list[int], p: int) -> float:
    s = sorted(v)
    rank = max(1, (len(s) * p + 99) // 100)
    return s[rank - 1] / 1e6


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--airlock", required=True)
    ap.add_argument("--remote", required=True)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--execs", type=int, default=50)
    ap.add_argument("--mechanism", choices=["fake", "native"])
    ap.add_argument("--short", action="store_true", help="2 rounds of 10: proves it completes")
    a = ap.parse_args()
    if a.short:
        a.rounds, a.execs = 2, 10
    os.environ["AIRLOCK_TEST_AIRLOCK"] = a.airlock
    mech = a.mechanism or ("native" if servers.native_unavailable() is None else "fake")
    if mech == "native" and servers.native_unavailable():
        print(f"bench_python: {servers.native_unavailable()}", file=sys.stderr)
        return 77
    with servers.stack(mech) as st:
        tok = os.path.join(st.dir, "svc.token")
        c = subprocess.Popen([a.remote, st.service_address, tok, st.image], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        assert c.stdin and c.stdout
        c_ns: list[int] = []
        py_ns: list[int] = []
        spec = airlock.EnvironmentSpec(
            airlock.TenantId("bench"), airlock.RunId("bench-py"), 1, st.image,
            airlock.ResourceLimits(1000, 256 << 20, 64, 64 << 20, 10000, 60),
            airlock.EgressPolicy(airlock.EgressMode.DENY, ()), {}, None,
        )
        cmd = airlock.ExecutionCommand(("/bin/true",), PurePosixPath("."), 60, None, 4096)
        try:
            async with airlock.ServiceEnvironment(st.service_address, st.service_token) as env:
                h = await env.provision(spec)

                async def py_round() -> None:
                    for _ in range(a.execs):
                        t0 = time.monotonic_ns()
                        r = await env.execute(h, cmd)
                        py_ns.append(time.monotonic_ns() - t0)
                        if r.exit_code != 0:
                            raise RuntimeError(f"/bin/true: {r}")

                def c_round() -> None:
                    assert c.stdin and c.stdout
                    c.stdin.write(f"{a.execs}\n")
                    c.stdin.flush()
                    line = c.stdout.readline().split()
                    if len(line) != a.execs:
                        raise RuntimeError(f"bench_remote_exec failed (exit {c.poll()})")
                    c_ns.extend(int(x) for x in line)

                # One warm-up round each, not counted.
                c_round()
                await py_round()
                c_ns.clear()
                py_ns.clear()
                for i in range(a.rounds):
                    if i % 2:
                        c_round()
                        await py_round()
                    else:
                        await py_round()
                        c_round()
                await env.destroy(h)
        finally:
            c.stdin.write("q\n")
            c.stdin.close()
            rc = c.wait(60)
        if rc != 0:
            print(f"bench_python: bench_remote_exec exited {rc}", file=sys.stderr)
            return 1
    n = len(py_ns)
    print(f"execute /bin/true through airlock serve ({mech}), {n} a side, {a.rounds} interleaved rounds")
    print(f"  C remote adapter   p50 {pct(c_ns, 50):.3f} ms  p99 {pct(c_ns, 99):.3f} ms  mean {statistics.mean(c_ns) / 1e6:.3f} ms")
    print(f"  Python adapter     p50 {pct(py_ns, 50):.3f} ms  p99 {pct(py_ns, 99):.3f} ms  mean {statistics.mean(py_ns) / 1e6:.3f} ms")
    print(f"  Python / C at p50  {pct(py_ns, 50) / pct(c_ns, 50):.2f}x  (+{pct(py_ns, 50) - pct(c_ns, 50):.3f} ms; aim under 1.3x)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
