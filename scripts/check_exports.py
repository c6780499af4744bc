#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The libraries' boundary, checked against the linker's own output.

usage: check_exports.py INCLUDE_DIR NM LIBRARY VERSION_SCRIPT [LIBRARY VERSION_SCRIPT ...]
                        [--users PROGRAM ...] -- CC [CC_ARGS...]

What include/airlock/ declares is the public interface; what the shared
libraries' dynamic symbol tables hold is what a program can link against.
Every declared name must be exported by exactly one library (the one whose
sources define it, as its version script lists it), and nothing else may be
exported but what one library lists for the others: a name its version
script lists that no public header declares is internal, and it must be
declared by a header under src/ and called by another of the libraries
(or a program given after --users), which link it from there rather than
hold a copy of their own. Fails (exit 1, naming each symbol) when a library
exports a name no public header declares and its version script does not
list (an internal function escaped: give it a non-airlock name or make it
static), when an internal name it exports is called by no other library or
program, or declared by no header under src/, when a declared function or object is exported by no library (no
version script lists it, or nothing defines it) or by more than one, and
when a version script lists a name no public header declares or that its
own library does not export (a stale entry, or one in the wrong library's
list).

The declarations come from the compiler, not from reading the headers with
patterns: every public header is compiled in one unit with -aux-info, which
writes each function the unit declares with the file and line it came from
and whether it is a declaration or a definition (the static inline helpers
in the headers are definitions and export nothing). Objects are not in that
list; the few extern objects are read from the headers' text.
"""
import os
import re
import subprocess
import sys
import tempfile


def declared(include_dir, cc):
    include_dir = os.path.realpath(include_dir)
    headers = sorted(os.path.relpath(os.path.join(d, f), include_dir)
                     for d, _, fs in os.walk(os.path.join(include_dir, 'airlock'))
                     for f in fs if f.endswith('.h'))
    names = set()
    with tempfile.TemporaryDirectory() as tmp:
        unit = os.path.join(tmp, 'public.c')
        aux = os.path.join(tmp, 'aux.txt')
        with open(unit, 'w') as f:
            f.writelines(f'#include "{h}"\n' for h in headers)
        subprocess.run(cc + ['-std=gnu17', '-D_GNU_SOURCE', '-I', include_dir, '-aux-info', aux,
                             '-S', '-o', os.devnull, unit], check=True)
        for line in open(aux):
            m = re.match(r'/\* (.*?):\d+:(.)(.) \*/ (.*)', line)
            if not m or not os.path.realpath(m.group(1)).startswith(include_dir + os.sep):
                continue
            if m.group(3) != 'C' or m.group(4).startswith('static '):
                continue  # a definition in a header (static inline): not a symbol
            name = re.search(r'(\w+) \(', m.group(4))
            names.add(name.group(1))
    for h in headers:
        text = open(os.path.join(include_dir, h)).read()
        text = re.sub(r'/\*.*?\*/|//[^\n]*', ' ', text, flags=re.S)
        for m in re.finditer(r'^\s*extern\s+(?!"C")[^;(]*?\b(\w+)\s*(?:\[[^\]]*\])?\s*;', text, re.M):
            names.add(m.group(1))
    return names


def exported(library, nm):
    out = subprocess.run([nm, '-D', '--defined-only', library], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        # Absolute symbols are version nodes, not code or data.
        if len(parts) == 3 and parts[1] != 'A':
            names.add(parts[2].split('@')[0])
    return names


def listed(version_script):
    text = re.sub(r'/\*.*?\*/|#[^\n]*', ' ', open(version_script).read(), flags=re.S)
    m = re.search(r'global:(.*?)local:', text, re.S)
    return {n.strip() for n in m.group(1).split(';') if n.strip()}


def referenced(path, nm):
    out = subprocess.run([nm, '-D', '--undefined-only', path], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1].split('@')[0] for line in out.splitlines() if line.strip()}


def internal_headers(include_dir):
    """The text of every header under src/, comments dropped."""
    src = os.path.join(os.path.dirname(os.path.realpath(include_dir)), 'src')
    text = []
    for d, _, fs in os.walk(src):
        for f in fs:
            if f.endswith('.h'):
                text.append(re.sub(r'/\*.*?\*/|//[^\n]*', ' ', open(os.path.join(d, f)).read(),
                                   flags=re.S))
    return '\n'.join(text)


def main():
    args = sys.argv[1:]
    sep = args.index('--')
    cc = args[sep + 1:]
    args = args[:sep]
    users = []
    if '--users' in args:
        users = args[args.index('--users') + 1:]
        args = args[:args.index('--users')]
    include_dir, nm = args[0], args[1]
    pairs = list(zip(args[2::2], args[3::2]))
    decl = declared(include_dir, cc)
    headers = internal_headers(include_dir)
    problems, exporters, total = [], {}, 0
    for library, version_script in pairs:
        lib, script = os.path.basename(library), os.path.basename(version_script)
        exp, lst = exported(library, nm), listed(version_script)
        total += len(exp)
        for n in exp:
            exporters.setdefault(n, []).append(lib)
        for n in sorted(exp - decl - lst):
            problems.append(f'{lib} exports a name declared in no header under include/airlock/: {n}')
        calls = set()
        for other in [p[0] for p in pairs if p[0] != library] + users:
            calls |= referenced(other, nm)
        for n in sorted((exp & lst) - decl):
            if n not in calls:
                problems.append(f'{lib} exports the internal {n}, which no other library or '
                                f'program calls (remove it from {script})')
            if not re.search(r'\b' + re.escape(n) + r'\b', headers):
                problems.append(f'{script} lists {n}, which neither a public header nor one '
                                'under src/ declares')
        for n in sorted((lst & decl) - exp):
            problems.append(f'{script} lists {n}, which {lib} does not define'
                            ' (it belongs in the list of the library whose sources define it)')
    for n in sorted(decl):
        libs = exporters.get(n, [])
        if not libs:
            problems.append(f'declared under include/airlock/ but exported by no library: {n}'
                            ' (add it to the version script of the library that defines it)')
        elif len(libs) > 1:
            problems.append(f'{n} is exported by {len(libs)} libraries: {", ".join(sorted(libs))}')
    for p in problems:
        print(p)
    print(f'{total} symbols exported by {len(pairs)} libraries, {len(decl)} declared, '
          f'{len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
