#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""gate.sandbox.no_runtime_in_worker: the worker holds no sandbox runtime,
checked from its sources and from what was built.

usage: check_no_runtime_in_worker.py SOURCE_ROOT NM WORKER_EXE WORKER_SO HTTP_SO
                                     CORE_ARCHIVE -- SERVICE_ARCHIVE...

Fails, naming the file or the symbol, when

1. sources: the include graph of the worker's sources (src/worker/,
   src/remote/, the artifact store src/artifact/, the outbound guard and its libcurl face, and the HTTP core
   they serve on), followed transitively through every "..." include,
   reaches a mechanism (src/exec/, src/mechanisms/), the image builder or
   store (src/image/), the host's facilities (src/host/: cgroups, network
   namespaces, volumes, loop devices, mounts), the service (src/service/),
   the egress proxy (src/egress/proxy*), the seccomp filter, the way a
   child is started (util/spawn.h, util/run.h, util/sealed.h) or a public
   header of any of them; or when one of those sources names a runtime
   program as a string ("runsc", "qemu...", "docker", "podman", "crun",
   "runc", "nsenter", "unshare", "ip");
2. symbols: the airlock-worker program, libairlock-worker.so or
   libairlock-http.so defines (full or dynamic symbol table) a name a
   service-side archive defines (so a transitive link fails too);
3. imports: one of them imports (nm -D --undefined-only) fork, vfork,
   clone, clone3, an exec*, posix_spawn*, system or popen;
4. the core: libairlock-core.so holds the helper runner and spawn (the
   service side's), so it is checked by object: the core archive's objects
   the worker side references, closed over their own references, import
   none of those functions and are none of util/spawn.c, util/run.c,
   util/sealed.c.

Debian's libcurl imports fork and execl, and libpq popen (their own
helpers, which no call of the worker's asks for); those libraries are not
ours and are left out, as is libc.
"""
import os
import re
import subprocess
import sys

WORKER_SOURCES = ('src/worker/', 'src/remote/', 'src/artifact/', 'src/egress/guard.c',
                  'src/egress/curl.c', 'src/http/')
FORBIDDEN_PATHS = ('src/exec/', 'src/mechanisms/', 'src/image/', 'src/host/', 'src/service/',
                   'src/egress/proxy', 'src/util/spawn.', 'src/util/run.', 'src/util/sealed.')
FORBIDDEN_PUBLIC = {'native', 'gvisor', 'fake', 'image', 'image_build', 'image_store',
                    'mechanisms', 'proxy', 'service', 'guest'}
PROGRAMS = re.compile(r'"(runsc|qemu[\w-]*|docker|podman|crun|runc|nsenter|unshare|ip)"')
PROCESS = re.compile(r'^(fork|vfork|clone|clone3|execve|execv|execvp|execvpe|execl|execlp|execle|'
                     r'fexecve|execveat|posix_spawn|posix_spawnp|system|popen)$')
CORE_SPAWN_OBJECTS = re.compile(r'(^|_)(spawn|run|sealed)\.c\.o$')
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def run(argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def includes_of(root, rel):
    text = open(os.path.join(root, rel), encoding='utf-8').read()
    out = []
    for inc in INCLUDE.findall(text):
        for base in ('src', 'include'):
            p = os.path.join(base, inc)
            if os.path.exists(os.path.join(root, p)):
                out.append(p)
                break
        else:
            here = os.path.join(os.path.dirname(rel), inc)
            if os.path.exists(os.path.join(root, here)):
                out.append(os.path.normpath(here))
    return out


def check_sources(root, problems):
    start = []
    for d, _, fs in os.walk(os.path.join(root, 'src')):
        for f in fs:
            rel = os.path.relpath(os.path.join(d, f), root)
            if f.endswith(('.c', '.h')) and rel.startswith(WORKER_SOURCES):
                start.append(rel)
    if not start:
        problems.append('no worker source found: nothing checked')
    seen, todo, via = set(start), list(start), {}
    while todo:
        rel = todo.pop()
        for inc in includes_of(root, rel):
            if inc not in seen:
                seen.add(inc)
                via[inc] = rel
                todo.append(inc)
    for rel in sorted(seen):
        pub = rel[len('include/airlock/'):-2] if rel.startswith('include/airlock/') else None
        if rel.startswith(FORBIDDEN_PATHS) or pub in FORBIDDEN_PUBLIC:
            chain, p = [rel], rel
            while p in via:
                p = via[p]
                chain.append(p)
            problems.append('the worker\'s include graph reaches ' + ' <- '.join(chain))
    for rel in sorted(start):
        for n, line in enumerate(open(os.path.join(root, rel), encoding='utf-8'), 1):
            m = PROGRAMS.search(line)
            if m:
                problems.append(f'{rel}:{n}: names the runtime program {m.group(0)}')
    return len(seen)


def defined(nm, path, dynamic):
    out = run([nm] + (['-D'] if dynamic else []) + ['--defined-only', path])
    return {p[2].split('@')[0] for p in (l.split() for l in out.splitlines())
            if len(p) == 3 and p[1] != 'A'}


def global_defined(nm, archive):
    out = run([nm, '--defined-only', archive])
    return {p[2] for p in (l.split() for l in out.splitlines()) if len(p) == 3 and p[1].isupper()}


def undefined_dyn(nm, path):
    out = run([nm, '-D', '--undefined-only', path])
    return {l.split()[-1].split('@')[0] for l in out.splitlines() if l.strip()}


def archive_objects(nm, archive):
    """{object: (defined globals, undefined)} of each member."""
    out = run([nm, archive])
    objs, cur = {}, None
    for line in out.splitlines():
        if line.endswith(':') and not line.startswith(' '):
            cur = line[:-1]
            objs[cur] = (set(), set())
            continue
        parts = line.split()
        if cur is None or not parts:
            continue
        if len(parts) == 2 and parts[0] == 'U':
            objs[cur][1].add(parts[1])
        elif len(parts) == 3 and parts[1].isupper() and parts[1] != 'U':
            objs[cur][0].add(parts[2])
    return objs


def main():
    args = sys.argv[1:]
    sep = args.index('--')
    root, nm, exe, worker_so, http_so, core_a = args[:sep]
    service_archives = args[sep + 1:]
    problems = []
    n_files = check_sources(root, problems)

    service_names = set()
    for a in service_archives:
        service_names |= global_defined(nm, a)
    if not service_names:
        problems.append('the service side\'s archives define no name: nothing to compare')
    ours = (exe, worker_so, http_so)
    refs = set()
    for path in ours:
        name = os.path.basename(path)
        held = defined(nm, path, False) | defined(nm, path, True)
        for s in sorted(held & service_names):
            problems.append(f'{name} holds {s}, which a service-side source defines')
        imports = undefined_dyn(nm, path)
        refs |= imports
        for s in sorted(imports):
            if PROCESS.match(s):
                problems.append(f'{name} imports {s}')

    objs = archive_objects(nm, core_a)
    if not objs:
        problems.append('the core archive has no object: nothing to compare')
    reached, todo = set(), [o for o, (d, _) in objs.items() if d & refs]
    while todo:
        o = todo.pop()
        if o in reached:
            continue
        reached.add(o)
        for p, (d, _) in objs.items():
            if p not in reached and d & objs[o][1]:
                todo.append(p)
    for o in sorted(reached):
        if CORE_SPAWN_OBJECTS.search(o):
            problems.append(f'the worker reaches the core\'s {o}, which starts processes')
        for s in sorted(objs[o][1]):
            if PROCESS.match(s):
                problems.append(f'the worker reaches the core\'s {o}, which imports {s}')
    if not reached:
        problems.append('the worker references no object of the core: the references were read wrong')

    for p in problems:
        print(p)
    print(f'{n_files} files in the worker\'s include graph, {len(service_names)} service-side '
          f'names, {len(reached)} of {len(objs)} core objects reached, {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
