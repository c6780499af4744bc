#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hold docs/worker-openapi.yaml to the worker's routes.

usage: check_worker_openapi.py SOURCE_ROOT

Fails, naming what differs, when

- the file is not OpenAPI 3.1;
- a path of the file is not one src/worker/decode.c's worker_route spells
  with its string constants (a full "/v1/..." path, or the runs prefix, a
  {run_id} segment and a suffix), nor one worker_artifact_route spells
  (its root, root/{artifact_id}, root/{artifact_id}/content, and the runs
  prefix, {run_id}, /artifacts/, {artifact_id}, /attach), or a route
  constant is in no path;
- the operations' x-worker-verb values are not exactly the verbs of
  src/worker/worker.h's worker_verb (WORKER_NONE and WORKER__MAX aside),
  once each, and the method each verb's comment there names is not the
  operation's;
- a $ref names nothing, or an operation has no 401 answer;
- the security schemes are not a bearer scheme for tenants and another
  for the reaper, with the reaper's route the only one using the latter;
- openapi-spec-validator, when it is installed (it is not a Debian
  package; without it the line says the document's schema was not
  checked), finds the document invalid.

The methods the worker answers are asked of a running worker by
tests/cli_test.sh (every path here with every method).
"""
import os
import re
import sys

import yaml

METHODS = ('get', 'put', 'post', 'delete', 'patch', 'head', 'options')


def route_paths(decode_c):
    """The paths worker_route spells, from its string constants."""
    body = decode_c[decode_c.index('int worker_route('):]
    body = body[:body.index('\n}\n')]
    consts = dict(re.findall(r'(\w+)\[\] = "([^"]+)"', body))
    if not consts:
        raise SystemExit('check_worker_openapi: no route constant found in worker_route')
    prefix = [v for v in consts.values() if v.startswith('/v1/') and v.endswith('/')]
    full = [v for v in consts.values() if v.startswith('/v1/') and not v.endswith('/')]
    suffixes = [v for v in consts.values() if not v.startswith('/v1/')]
    if len(prefix) != 1:
        raise SystemExit(f'check_worker_openapi: expected one runs prefix, found {prefix}')
    return set(full) | {prefix[0] + '{run_id}' + s for s in suffixes}


def artifact_paths(decode_c):
    """The paths worker_artifact_route spells, from its string constants."""
    body = decode_c[decode_c.index('int worker_artifact_route('):]
    body = body[:body.index('\n}\n')]
    c = dict(re.findall(r'(\w+)\[\] = "([^"]+)"', body))
    need = ('root', 'content', 'runs', 'attach', 'mid')
    missing = [k for k in need if k not in c]
    if missing:
        raise SystemExit(f'check_worker_openapi: worker_artifact_route lacks {missing}')
    return {c['root'], c['root'] + '/{artifact_id}', c['root'] + '/{artifact_id}' + c['content'],
            c['runs'] + '{run_id}' + c['mid'] + '{artifact_id}' + c['attach']}


def verbs(worker_h):
    """worker_verb's values and the method their comments name."""
    enum = worker_h[worker_h.index('typedef enum worker_verb'):]
    enum = enum[:enum.index('} worker_verb;')]
    found = {}
    for name, comment in re.findall(r'(WORKER_\w+)[^,]*,\s*(?:/\*\s*(\w+)[^*]*\*/)?', enum):
        if name not in ('WORKER_NONE', 'WORKER__MAX'):
            found[name] = (comment or '').lower()
    return found


def refs(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == '$ref':
                out.append(v)
            else:
                refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else '.'
    with open(os.path.join(root, 'docs/worker-openapi.yaml'), encoding='utf-8') as f:
        doc = yaml.safe_load(f)
    with open(os.path.join(root, 'src/worker/decode.c'), encoding='utf-8') as f:
        decode_c = f.read()
    with open(os.path.join(root, 'src/worker/worker.h'), encoding='utf-8') as f:
        worker_h = f.read()
    problems = []
    if not str(doc.get('openapi', '')).startswith('3.1'):
        problems.append(f'openapi is {doc.get("openapi")!r}, not 3.1.x')
    paths = doc.get('paths', {})
    want = route_paths(decode_c) | artifact_paths(decode_c)
    for p in sorted(set(paths) - want):
        problems.append(f'{p}: no route of worker_route (src/worker/decode.c) spells it')
    for p in sorted(want - set(paths)):
        problems.append(f'{p}: worker_route serves it and the file does not describe it')
    seen = {}
    schemes = doc.get('components', {}).get('securitySchemes', {})
    for p, item in paths.items():
        for m in METHODS:
            op = item.get(m)
            if op is None:
                continue
            v = op.get('x-worker-verb')
            if v in seen:
                problems.append(f'{m.upper()} {p}: {v} is also {seen[v]}')
            seen[v] = f'{m.upper()} {p}'
            if '401' not in op.get('responses', {}):
                problems.append(f'{m.upper()} {p}: no 401 answer')
            uses = [k for req in op.get('security', doc.get('security', [])) for k in req]
            if ('reaperToken' in uses) != (v == 'WORKER_REAPER_STALE'):
                problems.append(f'{m.upper()} {p}: the reaper\'s token is for the reaper\'s '
                                'route alone')
    have = verbs(worker_h)
    for v in sorted(set(have) - set(seen)):
        problems.append(f'{v}: a verb of worker_verb no operation names (x-worker-verb)')
    for v in sorted(set(seen) - set(have)):
        problems.append(f'{seen[v]}: x-worker-verb {v} is not a verb of worker_verb')
    for v, where in seen.items():
        if v in have and have[v] and where.split()[0].lower() != have[v]:
            problems.append(f'{where}: worker.h says {v} is {have[v].upper()}')
    for name in ('tenantToken', 'reaperToken'):
        s = schemes.get(name, {})
        if s.get('type') != 'http' or s.get('scheme') != 'bearer':
            problems.append(f'securitySchemes.{name}: not an http bearer scheme')
    found = []
    refs(doc, found)
    for r in found:
        node = doc
        for part in r.lstrip('#/').split('/'):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            problems.append(f'$ref {r} names nothing')
    try:
        from openapi_spec_validator import validate
    except ImportError:
        print('openapi-spec-validator is not installed: the document\'s own schema not checked')
    else:
        try:
            validate(doc)
        except Exception as e:  # the validator's error types vary by version
            problems.append(f'openapi-spec-validator: {str(e).splitlines()[0]}')
    for p in problems:
        print(p)
    print(f'check_worker_openapi: {len(paths)} paths, {len(seen)} operations, '
          f'{len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
