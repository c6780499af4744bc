#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fail when an error message could say its reason twice or a layer twice.

A message is made once (src/core/error.c, error_fill): airlock_error_set
appends strerror(errnum) itself, and airlock_error_wrap joins the inner
message, which already ends in its reason. So, in every call of
airlock_error_set, airlock_error_wrap and airlock_error_prefix under src/:

  1. no argument calls strerror(): pass the errno as errnum instead (a
     message formatted with it says the reason twice when errnum is set,
     and loses the errno when it is not);
  2. no airlock_error_set passes another error's message (.message,
     ->message) with a non-zero errnum: that says the inner reason and
     then errnum's again; a layer crossed is airlock_error_wrap;
  3. no message of the mechanisms, the host facilities and the remote
     adapter (src/exec/, src/host/, src/remote/) starts with "provision",
     "execute" or "destroy": the core's wrapper says the verb ("execute
     (native): ") and the step runner (src/exec/step.c) says the step,
     once each.

Usage: check_error_messages.py [SOURCE_ROOT]
"""
import os
import re
import sys

CALL = re.compile(r"\bairlock_error_(set|wrap|prefix)\s*\(")


def calls(text):
    """Yield (kind, offset, [arguments]) of each call, arguments split at
    the top-level commas (strings and nested parentheses skipped)."""
    for m in CALL.finditer(text):
        i = m.end()
        depth, args, cur = 1, [], []
        while i < len(text) and depth:
            c = text[i]
            if c in "\"'":
                j = i + 1
                while j < len(text) and text[j] != c:
                    j += 2 if text[j] == "\\" else 1
                cur.append(text[i : j + 1])
                i = j + 1
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if not depth:
                    break
            if c == "," and depth == 1:
                args.append("".join(cur).strip())
                cur = []
            else:
                cur.append(c)
            i += 1
        args.append("".join(cur).strip())
        yield m.group(1), m.start(), args


def literal(arg):
    """The text of the string literals an argument starts with."""
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', arg.split(",")[0]))


def check(root):
    bad = []
    src = os.path.join(root, "src")
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            text = open(path, encoding="utf-8").read()
            # Comments say how messages are made; only code is checked.
            code = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group(0)), text, flags=re.S)
            for kind, at, args in calls(code):
                line = code.count("\n", 0, at) + 1
                where = f"{rel}:{line}"
                if any(re.search(r"(?<![\w.])strerror\s*\(", a) for a in args):
                    bad.append(f"{where}: airlock_error_{kind} with strerror() among its "
                               "arguments: pass the errno as errnum")
                if kind == "set" and len(args) >= 4 and args[2] != "0" and any(
                        re.search(r"(\.|->)message\b", a) for a in args[3:]):
                    bad.append(f"{where}: airlock_error_set with another error's message and "
                               "an errnum: use airlock_error_wrap")
                fmt_at = {"set": 3, "wrap": 3, "prefix": 1}[kind]
                verb = re.match(r"(provision|execute|destroy)\b",
                                literal(args[fmt_at]) if len(args) > fmt_at else "")
                if rel.startswith(("src/exec/", "src/host/", "src/remote/")) and verb:
                    bad.append(f"{where}: an adapter's or facility's message starts with "
                               f"\"{verb.group(1)}\": the core's wrapper says the verb")
    return bad


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    bad = check(root)
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} error message(s) to fix (scripts/check_error_messages.py says why)")
        return 1
    print("error messages: each reason and each layer said once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
