#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""gate.sandbox.artifact_key_opaque, structural: the storage key is derived
from platform values only (the specification, "The storage key is
derived, never composed").

usage: check_artifact_key_opaque.py SOURCE_ROOT
       check_artifact_key_opaque.py --self-test SOURCE_ROOT

Fails, naming the file and line, when

1. the key function airlock_artifact_storage_key, as declared in
   include/airlock/port/artifact.h and as defined (once, in
   src/artifact/key.c), has parameters other than exactly
   (const char *tenant_id, const char *artifact_id) plus its out buffer
   (char out[AIRLOCK_ARTIFACT_KEY_MAX]) and its error (airlock_error *err);
2. its module, src/artifact/key.c, names ArtifactMetadata at all: the type,
   or a member that only ArtifactMetadata has (filename, run_id, origin,
   trust, created_at_ms, expires_at_ms, has_expires_at);
3. any source of the store, src/artifact/, performs a path join or a
   path-taking call (the printf family, strcat/strcpy and their kin,
   memcpy, and every open/mkdir/rename/link/unlink/stat call, the
   adapter's own wrappers included) with a value reachable from a
   caller-supplied field of ArtifactMetadata: a member other than
   tenant_id read from a variable declared airlock_artifact_metadata, the
   metadata variable itself, or a variable assigned (transitively) from
   one of those;
4. an adapter's put_begin, open or remove is handed a key that the same
   function did not fill with airlock_artifact_storage_key.

Comments and string literals are removed before any of it is read. The
self-test plants each kind of violation in a copy of the sources and fails
unless the check catches every one (and passes the copy unchanged).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HEADER = 'include/airlock/port/artifact.h'
KEY_MODULE = 'src/artifact/key.c'
STORE_DIR = 'src/artifact'
KEY_FN = 'airlock_artifact_storage_key'
WANT_PARAMS = [('const char *', 'tenant_id'), ('const char *', 'artifact_id'),
               ('char', 'out[AIRLOCK_ARTIFACT_KEY_MAX]'), ('airlock_error *', 'err')]
# Members of airlock_artifact_metadata a caller writes; tenant_id is the
# platform's (the key's first input) and is the one member allowed.
PLATFORM_FIELDS = {'tenant_id'}
# Only ArtifactMetadata has these: their very name in the key module is a
# violation, whatever variable they are read from.
METADATA_ONLY = {'filename', 'run_id', 'origin', 'trust', 'created_at_ms', 'expires_at_ms',
                 'has_expires_at'}
PATH_CALL = re.compile(
    r'\b(\w*(?:printf|strcat|strncat|strcpy|strncpy|stpcpy|stpncpy|memcpy|mempcpy|asprintf|'
    r'open|openat|openat2|opendir|mkdir|mkdirat|rename|renameat|renameat2|link|linkat|'
    r'unlink|unlinkat|stat|fstatat|lstat|statx|symlink|symlinkat|chmod|fchmodat|chown|'
    r'fchownat|utimensat|fopen|fs_dir|join|path)\w*)\s*\(')
ADAPTER_KEY_CALL = re.compile(r'->\s*(put_begin|open|remove)\s*\(')


def strip(text):
    """Comments removed and string/char literals emptied; newlines kept so
    line numbers stay right."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append('\n' * text.count('\n', i, j))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def matching(text, i, open_c='(', close_c=')'):
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_c:
            depth += 1
        elif text[j] == close_c:
            depth -= 1
            if depth == 0:
                return j
    return -1


def split_args(s):
    args, depth, cur = [], 0, []
    for c in s:
        if c in '([{':
            depth += 1
        elif c in ')]}':
            depth -= 1
        if c == ',' and depth == 0:
            args.append(''.join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if ''.join(cur).strip():
        args.append(''.join(cur).strip())
    return args


def line_of(text, i):
    return text.count('\n', 0, i) + 1


def params_of(text, name):
    """[(offset, [params], is_definition)] of each declaration/definition."""
    out = []
    for m in re.finditer(r'\b' + name + r'\s*\(', text):
        # A call inside a function body is neither: only at depth 0.
        if text[:m.start()].count('{') != text[:m.start()].count('}'):
            continue
        o = m.end() - 1
        c = matching(text, o)
        if c < 0:
            continue
        rest = text[c + 1:].lstrip()
        params = [' '.join(p.split()) for p in split_args(text[o + 1:c])]
        out.append((m.start(), params, rest.startswith('{')))
    return out


def wanted_params():
    return [f'{typ}{"" if typ.endswith("*") else " "}{name}' for typ, name in WANT_PARAMS]


def check_signature(root, problems):
    want = wanted_params()
    # The C++ guard's brace is not a scope of C declarations.
    hdr = re.sub(r'extern\s*""\s*\{', '',
                 strip(open(os.path.join(root, HEADER), encoding='utf-8').read()))
    decls = params_of(hdr, KEY_FN)
    if len(decls) != 1:
        problems.append(f'{HEADER}: {len(decls)} declarations of {KEY_FN}, expected 1')
    for off, params, _ in decls:
        if params != want:
            problems.append(f'{HEADER}:{line_of(hdr, off)}: {KEY_FN} has parameters '
                            f'({", ".join(params)}), not exactly ({", ".join(want)})')
    defs = []
    for d, _, fs in os.walk(os.path.join(root, 'src')):
        for f in fs:
            if not f.endswith(('.c', '.h')):
                continue
            rel = os.path.relpath(os.path.join(d, f), root)
            text = strip(open(os.path.join(root, rel), encoding='utf-8').read())
            for off, params, is_def in params_of(text, KEY_FN):
                if is_def:
                    defs.append(rel)
                if params != want:
                    problems.append(f'{rel}:{line_of(text, off)}: {KEY_FN} has parameters '
                                    f'({", ".join(params)}), not exactly ({", ".join(want)})')
    if defs != [KEY_MODULE]:
        problems.append(f'{KEY_FN} must be defined once, in {KEY_MODULE}: defined in '
                        f'{defs or "no file"}')


def check_key_module(root, problems):
    text = strip(open(os.path.join(root, KEY_MODULE), encoding='utf-8').read())
    for m in re.finditer(r'\b(airlock_artifact_metadata|' + '|'.join(sorted(METADATA_ONLY)) +
                         r')\b', text):
        problems.append(f'{KEY_MODULE}:{line_of(text, m.start())}: the key module names '
                        f'{m.group(1)}, which is ArtifactMetadata\'s')


def functions(text):
    """(name, body_start, body_end) of each function definition."""
    out, i = [], 0
    while True:
        i = text.find('{', i)
        if i < 0:
            return out
        if text[:i].count('{') != text[:i].count('}'):
            i += 1
            continue
        head = text[:i].rstrip()
        end = matching(text, i, '{', '}')
        if head.endswith(')'):
            # the identifier before the parameter list
            depth, j = 0, len(head) - 1
            while j >= 0:
                if head[j] == ')':
                    depth += 1
                elif head[j] == '(':
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            m = re.search(r'(\w+)\s*$', head[:j])
            out.append((m.group(1) if m else '?', i, end))
        i = end + 1 if end > 0 else i + 1


def check_store_sources(root, problems):
    sdir = os.path.join(root, STORE_DIR)
    seen_meta = 0
    for f in sorted(os.listdir(sdir)):
        if not f.endswith(('.c', '.h')):
            continue
        rel = os.path.join(STORE_DIR, f)
        text = strip(open(os.path.join(root, rel), encoding='utf-8').read())
        # Variables of the metadata's type (parameters and locals), whole file.
        meta_vars = set(re.findall(r'\bairlock_artifact_metadata\s*\*?\s*(?:const\s+)?\*?\s*(\w+)',
                                   text))
        seen_meta += len(meta_vars)
        tainted_src = []
        for v in meta_vars:
            tainted_src.append(re.compile(r'\b' + v + r'\s*(?:->|\.)\s*(?!(?:' +
                                          '|'.join(PLATFORM_FIELDS) + r')\b)\w+'))
            tainted_src.append(re.compile(r'(?<![\w.>])' + v + r'\b(?!\s*(?:->|\.))'))
        tainted = set()
        assign = re.compile(r'(?:\b|\*)(\w+)(\s*\[[^\]]*\])?\s*=(?!=)([^;]*);')
        changed = True
        while changed and tainted_src:
            changed = False
            for m in assign.finditer(text):
                var, rhs = m.group(1), m.group(3)
                if var in tainted or var in meta_vars:
                    continue
                if any(p.search(rhs) for p in tainted_src) or any(
                        re.search(r'\b' + t + r'\b', rhs) for t in tainted):
                    tainted.add(var)
                    changed = True

        def is_tainted(expr):
            return any(p.search(expr) for p in tainted_src) or any(
                re.search(r'\b' + t + r'\b', expr) for t in tainted)

        for m in PATH_CALL.finditer(text):
            name = m.group(1)
            if text[:m.start()].count('{') == text[:m.start()].count('}'):
                continue  # a declaration or a definition's head, not a call
            o = m.end() - 1
            c = matching(text, o)
            if c < 0:
                continue
            args = text[o + 1:c]
            if is_tainted(args):
                problems.append(f'{rel}:{line_of(text, m.start())}: {name}() is given a value '
                                f'reachable from a caller-supplied ArtifactMetadata field: '
                                f'{" ".join(args.split())[:120]}')
        # Rule 4: every key an adapter is handed comes from the key function.
        for fname, b, e in functions(text):
            body = text[b:e]
            filled = set()
            for km in re.finditer(r'\b' + KEY_FN + r'\s*\(', body):
                o = km.end() - 1
                a = split_args(body[o + 1:matching(body, o)])
                if len(a) == 4:
                    filled.add(' '.join(a[2].split()))
            for am in ADAPTER_KEY_CALL.finditer(body):
                o = am.end() - 1
                a = split_args(body[o + 1:matching(body, o)])
                key = ' '.join(a[1].split()) if len(a) > 1 else ''
                if key not in filled:
                    problems.append(f'{rel}:{line_of(text, b + am.start())}: {fname}() hands the '
                                    f'adapter\'s {am.group(1)} the key "{key}", which {KEY_FN} '
                                    f'did not fill in that function')
    if not seen_meta:
        problems.append(f'{STORE_DIR}: no variable of type airlock_artifact_metadata found: '
                        f'the taint rule checked nothing (the reading is wrong)')


def check(root):
    problems = []
    check_signature(root, problems)
    check_key_module(root, problems)
    check_store_sources(root, problems)
    return problems


# ---- the self-test ----------------------------------------------------------

PLANTS = [
    ('a third input to the key function', [
        (HEADER, 'const char *artifact_id,\n', 'const char *artifact_id, const char *filename,\n'),
        (KEY_MODULE, 'const char *artifact_id,\n', 'const char *artifact_id, const char *filename,\n'),
    ], 'not exactly'),
    ('the key module names a metadata field', [
        (KEY_MODULE, '\tsize_t t = strlen(tenant_id);',
         '\tsize_t t = strlen(tenant_id);\n\tconst airlock_artifact_metadata *md = NULL;\n'
         '\t(void)md;'),
    ], 'names airlock_artifact_metadata'),
    ('a path joined from the filename', [
        ('src/artifact/store.c', '\tairlock_artifact_put *p = NULL;\n\t/* The key',
         '\tairlock_artifact_put *p = NULL;\n\tchar path[512];\n'
         '\tsnprintf(path, sizeof(path), "%s/%s", metadata->tenant_id, metadata->filename);\n'
         '\t/* The key'),
    ], 'snprintf() is given'),
    ('an open of a name taken from the media type, through a variable', [
        ('src/artifact/store.c', '\tairlock_artifact_put *p = NULL;\n\t/* The key',
         '\tairlock_artifact_put *p = NULL;\n\tconst char *name = metadata->media_type;\n'
         '\tconst char *again = name;\n\tclose(openat(AT_FDCWD, again, O_RDONLY));\n'
         '\t/* The key'),
    ], 'openat() is given'),
    ('the metadata handed to a path-taking helper whole', [
        ('src/artifact/fs.c', 'static int fs_put_begin(void *ctx, const char *key,',
         'static int fs_put_begin_md(int d, const airlock_artifact_metadata *m);\n'
         'static int fs_put_begin_md(int d, const airlock_artifact_metadata *m)\n'
         '{\n\treturn fs_dir(d, (const char *)m, true, NULL, NULL);\n}\n'
         'static int fs_put_begin(void *ctx, const char *key,'),
    ], 'fs_dir() is given'),
    ('an adapter handed a key the key function did not make', [
        ('src/artifact/store.c', 'return s->ops->remove(s->ctx, key, err);',
         'return s->ops->remove(s->ctx, tenant_id, err);'),
    ], 'did not fill'),
]


def self_test(root):
    failures = 0
    with tempfile.TemporaryDirectory(prefix='airlock-keygate-') as tmp:
        def fresh():
            dst = os.path.join(tmp, 'tree')
            if os.path.exists(dst):
                shutil.rmtree(dst)
            os.makedirs(os.path.join(dst, 'include/airlock/port'))
            shutil.copy(os.path.join(root, HEADER), os.path.join(dst, HEADER))
            shutil.copytree(os.path.join(root, STORE_DIR), os.path.join(dst, STORE_DIR))
            return dst
        base = check(fresh())
        if base:
            print('self-test: the unchanged copy fails: ' + '; '.join(base))
            failures += 1
        for what, edits, expect in PLANTS:
            dst = fresh()
            for rel, old, new in edits:
                p = os.path.join(dst, rel)
                text = open(p, encoding='utf-8').read()
                if old not in text:
                    print(f'self-test: {what}: {rel} no longer holds the text to replace; '
                          f'update the plant')
                    failures += 1
                    break
                open(p, 'w', encoding='utf-8').write(text.replace(old, new, 1))
            found = check(dst)
            if not any(expect in p for p in found):
                print(f'self-test: {what}: NOT caught (expected "{expect}"; got {found})')
                failures += 1
            else:
                print(f'self-test: {what}: caught')
    return failures


def main():
    args = sys.argv[1:]
    if args and args[0] == '--self-test':
        return 1 if self_test(args[1]) else 0
    root = args[0] if args else '.'
    problems = check(root)
    for p in problems:
        print(p)
    print(f'artifact_key_opaque: {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
