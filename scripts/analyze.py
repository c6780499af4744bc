#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Static analysis (gcc's -fanalyzer) over the library, the CLI and the fuzz
harnesses; `ninja -C build analyze` runs it and scripts/test.sh runs that.

usage: analyze.py COMPILE_COMMANDS SUPPRESSIONS JOBS CC [CC_ARGS...]
(JOBS 0: one per processor)

Each source of those targets is compiled again, with the flags the build
used, by CC with -fanalyzer and JSON diagnostics, JOBS at a time, into
/dev/null. A finding is (source file, function, analyzer check). Findings
listed in SUPPRESSIONS (scripts/analyzer.supp: each entry was read and found
false, and says why) are counted and dropped; any other fails the run
(exit 1) with the file, line, function and the analyzer's message. An entry
that matched nothing is reported so that the list stays short.

gcc rather than clang's scan-build: on this tree -fanalyzer takes well
under a minute on two cores where scan-build takes over three, and its
findings come as JSON a script can match without parsing HTML reports.
"""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys

# The targets analyzed, by the prefix of their objects in compile_commands.json.
TARGETS = ('libairlock-internal-core.a.p/', 'libairlock-internal-http.a.p/',
           'libairlock-internal-service.a.p/', 'libairlock-internal-worker.a.p/',
           'libairlock_host.a.p/', 'libairlock_image_build.a.p/', 'airlock.p/',
           'airlock-worker.p/', 'fuzz/fuzz_')
# Flags of the build that do not belong in an analysis compile.
DROP = {'-Werror', '-MD', '-c'}
DROP_WITH_ARG = {'-o', '-MF', '-MQ'}
# Compiler launchers a build may put before the compiler in its commands.
LAUNCHERS = {'ccache', 'sccache', 'distcc'}


def units(path):
    """(source, directory, argv without compiler, output and -Werror) per unit."""
    seen = set()
    for e in json.load(open(path)):
        out = e['output']
        if not out.startswith(TARGETS) or out.startswith('fuzz/') and 'regress' in e['file']:
            continue
        src = os.path.normpath(os.path.join(e['directory'], e['file']))
        # The embedded starter is a byte array: nothing to analyze.
        if src in seen or 'meson-generated' in out:
            continue
        seen.add(src)
        argv, skip = [], False
        words = shlex.split(e['command'])
        # A compiler launcher meson found (ccache) comes before the compiler:
        # both go, the analysis compile names its own compiler.
        while words and os.path.basename(words[0]) in LAUNCHERS:
            words = words[1:]
        for a in words[1:]:
            if skip:
                skip = False
            elif a in DROP_WITH_ARG:
                skip = True
            elif a not in DROP and not a.startswith('-fdiagnostics-'):
                argv.append(a)
        yield src, e['directory'], argv


def analyze(cc, unit):
    src, directory, argv = unit
    p = subprocess.run(cc + argv + ['-fanalyzer', '-fdiagnostics-format=json', '-o', os.devnull,
                                    '-c'], cwd=directory, capture_output=True, text=True)
    findings, other = [], []
    for line in p.stderr.splitlines():
        if not line.startswith('['):
            other.append(line)
            continue
        for d in json.loads(line):
            opt = d.get('option') or ''
            if not opt.startswith('-Wanalyzer-'):
                other.append(f'{src}: {d["kind"]}: {d["message"]}')
                continue
            path = d.get('path') or []
            func = path[-1].get('function') if path else None
            locs = d.get('locations') or []
            where = locs[0]['caret'] if locs else (path[-1].get('location') if path else None)
            line_no = where.get('line') if where else None
            findings.append((src, func or '?', opt[len('-Wanalyzer-'):], line_no, d['message']))
    if p.returncode != 0 and not findings:
        other.append(f'{src}: the analysis compile failed (exit {p.returncode})')
    return findings, other


def suppressions(path, root):
    entries = {}
    for n, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        m = re.match(r'(\S+)\s+(\S+)\s+(\S+)\s+--\s+\S', line)
        if not m:
            sys.exit(f'{path}:{n}: expected "FILE FUNCTION CHECK -- reason"')
        entries[(os.path.join(root, m.group(1)), m.group(2), m.group(3))] = n
    return entries


def main():
    compile_commands, supp_path, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3]) or os.cpu_count()
    cc = sys.argv[4:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(supp_path)))
    supp = suppressions(supp_path, root)
    todo = list(units(compile_commands))
    used, new, errors = set(), [], []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for findings, other in pool.map(lambda u: analyze(cc, u), todo):
            errors += other
            for f in findings:
                key = f[:3]
                if key in supp:
                    used.add(key)
                else:
                    new.append(f)
    for e in errors:
        print(e)
    for src, func, check, line_no, msg in sorted(set(new), key=lambda f: (f[0], f[3] or 0)):
        print(f'{os.path.relpath(src, root)}:{line_no}: in {func}: {msg} [-Wanalyzer-{check}]')
    for key in sorted(set(supp) - used):
        print(f'note: {os.path.relpath(supp_path, root)}:{supp[key]} matched nothing '
              f'({os.path.relpath(key[0], root)} {key[1]} {key[2]}): remove it if the code changed')
    print(f'analyze: {len(todo)} files, {len(set(new))} new findings, '
          f'{len(used)} suppressed entries matched')
    if new:
        print('analyze: a new finding fails the run: fix it, or, when it was read and found false, '
              f'add "FILE FUNCTION CHECK -- reason" to {os.path.relpath(supp_path, root)}')
    return 1 if new or errors else 0


if __name__ == '__main__':
    sys.exit(main())
