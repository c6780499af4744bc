#!/bin/sh
# The CLI as a person uses it: verbs, --help everywhere, exit codes, and the
# messages that name the bad input and the setting. Usage: cli_test.sh AIRLOCK SRCDIR
set -u
AIRLOCK=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
pass=0
fail=0

# expect NAME WANT_EXIT GREP_PATTERN -- CMD...   (pattern '' matches anything)
expect() {
	name=$1 want=$2 pat=$3
	shift 4
	"$@" >"$TMP/out" 2>&1
	got=$?
	if [ "$got" != "$want" ]; then
		echo "FAIL $name: exit $got, want $want"; sed 's/^/    /' "$TMP/out"; fail=$((fail + 1)); return
	fi
	if [ -n "$pat" ] && ! grep -Eq -- "$pat" "$TMP/out"; then
		echo "FAIL $name: output lacks /$pat/"; sed 's/^/    /' "$TMP/out"; fail=$((fail + 1)); return
	fi
	echo "ok   $name"; pass=$((pass + 1))
}

# Settings in the caller's environment must not leak into these checks.
unset AIRLOCK_DEPLOYMENT_MODE AIRLOCK_AUTH_MODE AIRLOCK_SANDBOX_MECHANISM AIRLOCK_SANDBOX_IMAGE \
	AIRLOCK_HARD_CAP_SECONDS AIRLOCK_IMAGE_STORE

expect help 0 'verbs:' -- "$AIRLOCK" --help
expect no-verb 64 'usage' -- "$AIRLOCK"
expect unknown-verb 64 "unknown verb 'frobnicate'" -- "$AIRLOCK" frobnicate
for v in run config doctor serve worker egress proxy image artifact; do
	expect "help-$v" 0 "usage: airlock $v" -- "$AIRLOCK" "$v" --help
done
expect not-implemented-verb 69 'NotImplemented' -- "$AIRLOCK" serve

# run on the fake mechanism: nothing executes, and it says so.
expect run-fake 0 'fake mechanism: nothing was executed' -- "$AIRLOCK" run --mechanism fake -- echo hi
"$AIRLOCK" run --mechanism fake --json -- echo hi >"$TMP/json" 2>"$TMP/err"
if python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["exit_code"] == 0 and r["killed_by"] is None and r["timed_out"] is False, r
assert r["files_changed"] == [] and r["stdout"] == "" and "duration_ms" in r, r
' "$TMP/json"; then echo "ok   run-fake-json"; pass=$((pass + 1)); else echo "FAIL run-fake-json"; cat "$TMP/json" "$TMP/err"; fail=$((fail + 1)); fi
printf 'input' >"$TMP/stdin"
expect run-stdin 0 '' -- "$AIRLOCK" run --mechanism fake --stdin "$TMP/stdin" -- cat
expect run-stdin-missing 64 'no-such-file' -- "$AIRLOCK" run --mechanism fake --stdin "$TMP/no-such-file" -- cat
expect run-no-command 64 'no command' -- "$AIRLOCK" run --mechanism fake
expect run-bad-bytes 64 '--memory' -- "$AIRLOCK" run --mechanism fake --memory 12X -- true
expect run-bad-int 64 '--pids' -- "$AIRLOCK" run --mechanism fake --pids many -- true
expect run-zero 64 'must be positive' -- "$AIRLOCK" run --mechanism fake --cpu 0 -- true
expect run-over-ceiling 65 'ceiling of 4096' -- "$AIRLOCK" run --mechanism fake --pids 5000 -- true
expect run-escape-cwd 65 'WorkspaceEscape' -- "$AIRLOCK" run --mechanism fake --cwd ../etc -- true
expect run-relative-argv0 65 'ToolValidationError' -- "$AIRLOCK" run --mechanism fake -- ./setup.sh
expect run-tier0-env 78 'AWS_SECRET_ACCESS_KEY' -- "$AIRLOCK" run --mechanism fake --env AWS_SECRET_ACCESS_KEY -- true
expect run-bad-mechanism 78 'not one of' -- "$AIRLOCK" run --mechanism podman -- true
# The native mechanism, for real, where this host can run it (root, cgroups,
# the default image in the store that scripts/test.sh builds).
if "$AIRLOCK" doctor | grep -Eq '^native +available' && [ -n "${AIRLOCK_TEST_IMAGE_STORE:-}" ]; then
	export AIRLOCK_IMAGE_STORE=$AIRLOCK_TEST_IMAGE_STORE
	expect run-native 0 '^hello 1000 /workspace' -- "$AIRLOCK" run -- python3 -c 'import os; print("hello", os.getuid(), os.getcwd())'
	expect run-native-exit 3 'exit 3' -- "$AIRLOCK" run -- sh -c 'exit 3'
	expect run-native-timeout 137 'killed: TIMEOUT' -- "$AIRLOCK" run --timeout 1 -- sleep 30
	expect run-native-memory 137 'killed: MEMORY' -- "$AIRLOCK" run --memory 64M -- python3 -c 'x = bytearray(1 << 30)'
	expect run-native-files 0 'CREATED +out/r.csv \(3 bytes\)' -- "$AIRLOCK" run -- sh -c 'mkdir out && printf 1,2 > out/r.csv'
	expect run-native-stdin 0 '^input piped' -- "$AIRLOCK" run --stdin "$TMP/stdin" -- sh -c 'cat; echo " piped"'
	expect run-native-cwd-missing 127 'working directory /workspace/sub: No such file' -- "$AIRLOCK" run --cwd sub -- pwd
	expect run-native-no-network 1 'ENETUNREACH|unreachable' -- "$AIRLOCK" run -- python3 -c 'import socket; socket.create_connection(("198.51.100.7", 80), 3)'
	expect run-native-not-found 127 'cannot execute' -- "$AIRLOCK" run -- no-such-program
	expect run-native-json 0 '"killed_by":null' -- "$AIRLOCK" run --json -- true
	unset AIRLOCK_IMAGE_STORE
else
	echo "skip run-native*: the native mechanism cannot run here (see airlock doctor)"
fi
expect run-production-refuses-fake 78 'deployment_mode=production.*auth_mode=dev|auth_mode=dev.*deployment_mode=production' -- \
	env AIRLOCK_DEPLOYMENT_MODE=production "$AIRLOCK" run --mechanism fake -- true
expect run-auth-refuses-fake 78 'auth_mode=token' -- \
	env AIRLOCK_AUTH_MODE=token "$AIRLOCK" run --mechanism fake -- true

# config check
expect config-defaults 0 'startup checks passed' -- "$AIRLOCK" config check
expect config-example 0 'startup checks passed' -- "$AIRLOCK" config check "$SRC/etc/airlock.example.yaml"
printf 'sandbox:\n  image: debian:12\n' >"$TMP/tag.yaml"
expect config-tag 78 'digest' -- "$AIRLOCK" config check "$TMP/tag.yaml"
printf 'deployment_mode: production\nsandbox:\n  mechanism: native\n' >"$TMP/prod.yaml"
expect config-production-native 78 'deployment_mode=production' -- "$AIRLOCK" config check "$TMP/prod.yaml"
printf 'deployment_mode: production\nsandbox:\n  mechanism: gvisor\n' >"$TMP/prod-gvisor.yaml"
expect config-production-gvisor 0 'startup checks passed' -- "$AIRLOCK" config check "$TMP/prod-gvisor.yaml"
printf 'sandbox:\n  mechanism: fake\n  colour: blue\n' >"$TMP/unknown.yaml"
expect config-unknown-key 78 'unknown.yaml:3' -- "$AIRLOCK" config check "$TMP/unknown.yaml"
expect config-missing-file 78 'nothing-here.yaml' -- "$AIRLOCK" config check "$TMP/nothing-here.yaml"
expect config-no-subcommand 64 'usage' -- "$AIRLOCK" config

# doctor
expect doctor 0 'fake +available' -- "$AIRLOCK" doctor
expect doctor-native 0 '^native +(available|unavailable: .+)' -- "$AIRLOCK" doctor
expect doctor-docker 0 '^docker +unavailable: .*Docker socket is rejected' -- "$AIRLOCK" doctor

# image
expect image-no-subcommand 64 'usage' -- "$AIRLOCK" image
mkdir -m 0700 "$TMP/store"
expect image-ls-empty 0 '' -- env AIRLOCK_IMAGE_STORE="$TMP/store" "$AIRLOCK" image ls
mkdir -m 0775 "$TMP/open-store"
expect image-store-group-writable 78 'supply-chain' -- env AIRLOCK_IMAGE_STORE="$TMP/open-store" "$AIRLOCK" image ls

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
