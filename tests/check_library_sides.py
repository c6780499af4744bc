#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Each shared library holds its own side and links its side's Debian
libraries only (docs/layout.md, "The libraries").

usage: check_library_sides.py NM READELF CORE_SO SERVICE_SO WORKER_SO HTTP_SO
                              HTTP_ARCHIVE -- SERVICE_ARCHIVE...

The service side's names are the global symbols its archives' objects
define (nm --defined-only on each archive given after --), the HTTP core's
those of HTTP_ARCHIVE. Fails, naming the symbol or the library, when

- libairlock-worker.so or libairlock-core.so defines a service-side name,
  in its dynamic symbol table (nm -D --defined-only: a service-side name a
  program could call) or in its full symbol table (a service-side object
  linked in and hidden by the version script);
- libairlock-worker.so, libairlock-service.so or libairlock-core.so holds
  a name of the HTTP core (its users link the one copy in
  libairlock-http.so);
- libairlock-worker.so needs (readelf -d, NEEDED) libseccomp, libmicrohttpd,
  gnutls or libevent (the HTTP core's libraries come through
  libairlock-http.so, never into the worker's own NEEDED);
- libairlock-service.so needs libcurl, libpq or libsqlite3 (the service
  holds no database: the worker's is the worker's);
- libairlock-http.so needs libseccomp, libevent, libcurl, libpq or
  libsqlite3;
- libairlock-core.so needs any of these seven.

So that a change in the tools' output cannot make it pass by reading
nothing, it also fails when the service side's archives define no name,
when the service library does not need libseccomp, when the worker
library does not need libcurl, libpq, libsqlite3 and libairlock-http.so,
when the HTTP library does not need libmicrohttpd, or when any of the
three does not need libairlock-core.so.
"""
import os
import re
import subprocess
import sys

SERVICE_ONLY = ('libseccomp', 'libmicrohttpd', 'libgnutls', 'libevent')
HTTP_FORBIDDEN = ('libseccomp', 'libevent', 'libcurl', 'libpq', 'libsqlite3')
WORKER_ONLY = ('libcurl', 'libpq', 'libsqlite3')


def run(argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def defined(nm, path, dynamic):
    """Global names (upper-case type) path defines."""
    out = run([nm] + (['-D'] if dynamic else []) + ['--defined-only', path])
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isupper() and parts[1] != 'A':
            names.add(parts[2].split('@')[0])
    return names


def all_defined(nm, path):
    """Every name path's full symbol table defines, local ones included."""
    out = run([nm, '--defined-only', path])
    return {p[2].split('@')[0] for p in (l.split() for l in out.splitlines()) if len(p) == 3}


def needed(readelf, path):
    out = run([readelf, '-d', path])
    return re.findall(r'\(NEEDED\)\s+Shared library: \[([^\]]+)\]', out)


def main():
    args = sys.argv[1:]
    sep = args.index('--')
    nm, readelf, core, service, worker, http, http_archive = args[:sep]
    http_names = defined(nm, http_archive, False)
    service_names = set()
    for archive in args[sep + 1:]:
        service_names |= defined(nm, archive, False)
    problems = []
    if not service_names:
        problems.append('the service side\'s archives define no symbol: nothing to compare')
    if not http_names:
        problems.append('the HTTP core\'s archive defines no symbol: nothing to compare')
    for lib in (worker, service, core):
        name = os.path.basename(lib)
        for n in sorted(all_defined(nm, lib) & http_names):
            problems.append(f'{name} holds {n}, which the HTTP core defines')
    for lib in (worker, core):
        name = os.path.basename(lib)
        for n in sorted(defined(nm, lib, True) & service_names):
            problems.append(f'{name} exports {n}, which a service-side source defines')
        for n in sorted((all_defined(nm, lib) & service_names) - defined(nm, lib, True)):
            problems.append(f'{name} holds {n}, which a service-side source defines')
    deps = {lib: needed(readelf, lib) for lib in (core, service, worker, http)}
    forbidden = {core: SERVICE_ONLY + WORKER_ONLY, service: WORKER_ONLY, worker: SERVICE_ONLY,
                 http: HTTP_FORBIDDEN}
    for lib, prefixes in forbidden.items():
        for d in deps[lib]:
            if d.startswith(prefixes):
                problems.append(f'{os.path.basename(lib)} needs {d}')
    for lib, want in ((service, 'libseccomp'), (worker, 'libcurl'), (worker, 'libpq'),
                      (worker, 'libsqlite3'), (worker, 'libairlock-http.so'),
                      (service, 'libairlock-http.so'), (http, 'libmicrohttpd'),
                      (service, 'libairlock-core.so'), (worker, 'libairlock-core.so'),
                      (http, 'libairlock-core.so')):
        if not any(d.startswith(want) for d in deps[lib]):
            problems.append(f'{os.path.basename(lib)} does not need {want}: '
                            'NEEDED read wrong, or the library lost its side')
    for lib in (core, service, worker, http):
        print(f'{os.path.basename(lib)} NEEDED: {" ".join(deps[lib])}')
    for p in problems:
        print(p)
    print(f'{len(service_names)} service-side names checked, {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
