#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The library's boundary, checked against the linker's own output.

usage: check_exports.py LIBRARY VERSION_SCRIPT INCLUDE_DIR NM CC [CC_ARGS...]

What include/airlock/ declares is the public interface; what the shared
library's dynamic symbol table holds is what a program can link against.
The two must be the same set of names. Fails (exit 1, naming each symbol)
when the library exports a name no public header declares (an internal
function escaped: give it a non-airlock name or make it static, and keep it
out of the version script), when a declared function or object is not
exported (the version script misses it, or nothing defines it), and when the
version script lists a name no header declares (a stale entry).

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


def main():
    library, version_script, include_dir, nm = sys.argv[1:5]
    cc = sys.argv[5:]
    decl, exp, lst = declared(include_dir, cc), exported(library, nm), listed(version_script)
    problems = []
    for n in sorted(exp - decl):
        problems.append(f'exported but declared in no header under include/airlock/: {n}')
    for n in sorted(decl - exp):
        problems.append(f'declared under include/airlock/ but not exported: {n}'
                        + ('' if n in lst else f' (add it to {os.path.basename(version_script)})'))
    for n in sorted(lst - decl):
        problems.append(f'{os.path.basename(version_script)} lists a name no public header declares: {n}')
    for p in problems:
        print(p)
    print(f'{len(exp)} symbols exported, {len(decl)} declared, {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
