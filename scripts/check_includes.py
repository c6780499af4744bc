#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fail when a source includes across an edge docs/layout.md forbids.

Every file under src/ belongs to one side (util, core, http, service,
worker, cli, guest) and every public header (include/airlock/) to the side whose sources
define it. A side may include its own headers and those of the sides below
it:

    util    -> util
    core    -> util, core
    http    -> util, core, http (src/http/, the HTTP server core)
    service -> util, core, http, service
    worker  -> util, core, http, worker (src/remote/, src/worker/, src/artifact/,
               the guard)
    guest   -> guest (a separate, static program run in a sandbox), and
               public headers (the constants it shares with the service)
    cli     -> cli, and public headers (include/airlock/)

and, inside the service side, a mechanism (src/exec/<name>/) includes
nothing of another mechanism, neither its sources' headers nor its public
header: what two mechanisms share lives in src/exec/. The HTTP server
core (src/http/) is a library of its own that the service and the worker
both link, so nothing of either may be in it.

ALLOWED below lists the edges that break these rules today, each with the
work that removes it; an entry that is no longer needed fails the check too,
so the list only shrinks.

Usage: check_includes.py [SOURCE_ROOT]
"""
import os
import re
import sys

CORE_EGRESS = {"policy", "addr", "evaluate", "connect", "resolve", "dial"}
WORKER_EGRESS = {"guard", "curl"}
MECHANISMS = ("native", "gvisor", "fake")

# The side of each public header: the side of the sources that define it.
PUBLIC = {
    "core": {"caps", "credential_file", "egress", "envbuild", "error", "escape", "ids", "json",
             "port/credentials", "port/exec", "port/workspace", "run_command", "secret",
             "settings", "tiers", "timeout", "types", "volume"},
    "service": {"fake", "guest", "gvisor", "image", "image_build", "image_store", "mechanisms",
                "native", "proxy", "service"},
    "worker": {"egress_curl", "port/artifact", "remote", "tools", "worker_client"},
}

MAY_INCLUDE = {
    "util": {"util"},
    "core": {"util", "core"},
    "http": {"util", "core", "http"},
    "service": {"util", "core", "http", "service"},
    "worker": {"util", "core", "http", "worker"},
    "guest": {"guest"},
    "cli": {"cli"},
}

# (file, included header): why it is still there.
ALLOWED = {}

# Header-only, no symbol to link: the cleanup attributes and TAKE_*, which
# every side and program may use.
ANYWHERE = {"util/cleanup.h"}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def side_of_source(rel):
    parts = rel.split("/")
    top = parts[1]
    if top == "util":
        return "util"
    if top in ("core", "workspace"):
        return "core"
    if top == "egress":
        base = os.path.splitext(parts[-1])[0]
        if base in CORE_EGRESS or base == "dial":
            return "core"
        if base in WORKER_EGRESS:
            return "worker"
        return "service"
    if top == "http":
        return "http"
    if top in ("host", "image", "exec", "mechanisms", "service"):
        return "service"
    if top in ("remote", "worker", "artifact"):
        return "worker"
    if top in ("cli", "guest"):
        return top
    raise SystemExit(f"check_includes: {rel}: no side for src/{top}/ (add it to this script)")


def side_of_public(name):
    for side, names in PUBLIC.items():
        if name in names:
            return side
    raise SystemExit(f"check_includes: include/airlock/{name}.h: no side (add it to PUBLIC)")


def mechanism_of(path):
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "exec" and parts[1] in MECHANISMS:
        return parts[1]
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    os.chdir(root)
    for name in sorted(os.listdir("include/airlock")) + [
            "port/" + n for n in sorted(os.listdir("include/airlock/port"))]:
        if name.endswith(".h"):
            side_of_public(name[:-2])
    bad, used = [], set()
    for dirpath, _, files in os.walk("src"):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            rel = os.path.join(dirpath, f)
            side = side_of_source(rel)
            mech = mechanism_of(rel[len("src/"):])
            with open(rel, encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if inc.startswith("airlock/"):
                        pub = inc[len("airlock/"):-len(".h")]
                        target = side_of_public(pub)
                        ok = side in ("cli", "guest") or target in MAY_INCLUDE[side]
                        other = pub if pub in MECHANISMS else None
                    else:
                        if not os.path.exists(os.path.join("src", inc)) or inc in ANYWHERE:
                            continue  # a generated header, a local one, or a header-only one
                        target = side_of_source("src/" + inc)
                        ok = target in MAY_INCLUDE[side]
                        other = mechanism_of(inc)
                    if mech and other and other != mech:
                        ok = False
                    if not ok:
                        if (rel, inc) in ALLOWED:
                            used.add((rel, inc))
                            continue
                        bad.append(f"{rel}:{n}: includes {inc} ({side} -> {target}"
                                   f"{', another mechanism' if mech and other and other != mech else ''})")
    for k in sorted(set(ALLOWED) - used):
        bad.append(f"{k[0]}: the allowance for {k[1]} is no longer needed; remove it from ALLOWED")
    for b in bad:
        print(b)
    if bad:
        print(f"check_includes: {len(bad)} forbidden include edge(s); docs/layout.md says which are allowed")
        return 1
    print(f"check_includes: no forbidden edge ({len(ALLOWED)} allowed ones left)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
