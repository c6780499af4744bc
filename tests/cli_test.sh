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
skip=0

# skipped REASON NAME...: each check that did not run is listed with the
# reason, counted, and reported ("SKIP cli::NAME: reason") for
# scripts/test.sh's summary; a skip is never a pass.
skipped() {
	reason=$1
	shift
	for n in "$@"; do echo "SKIP cli::$n: $reason"; skip=$((skip + 1)); done
}

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
for v in run config doctor serve worker tool egress proxy image artifact; do
	expect "help-$v" 0 "usage: airlock $v" -- "$AIRLOCK" "$v" --help
done
expect artifact-no-sub 64 'usage: airlock artifact put' -- "$AIRLOCK" artifact
expect artifact-unknown-sub 64 "unknown subcommand 'frob'" -- "$AIRLOCK" artifact frob
# worker executes the airlock-worker beside airlock, with its arguments.
expect worker-execs 64 'usage: airlock-worker' -- "$AIRLOCK" worker --bogus
expect worker-settings 78 'airlock-worker: settings: .*no-such' -- "$AIRLOCK" worker --config "$TMP/no-such.yaml"

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
# Values that deserve a clear refusal: the flag and the minimum or ceiling.
expect run-memory-floor 64 '^airlock run: --memory 1024: below the minimum of 8M' -- "$AIRLOCK" run --mechanism fake --memory 1K -- true
expect run-memory-floor-100k 64 '^airlock run: --memory 102400: below the minimum of 8M' -- "$AIRLOCK" run --mechanism fake --memory 100K -- true
expect run-pids-floor 64 '^airlock run: --pids 1: below the minimum of 4' -- "$AIRLOCK" run --mechanism fake --pids 1 -- true
expect run-output-ceiling 64 '^airlock run: --output-limit 209715200: above the ceiling of 16M' -- "$AIRLOCK" run --mechanism fake --output-limit 200M -- true
# --stdin takes a pipe or a FIFO too (- is airlock run's own stdin), read
# until its writer closes it: within the start budget (2 s here, so a
# writer that never closes is an error naming the budget, not a hang) and
# the 16 MiB cap, the same cap and the same refusal as for a file.
printf 'limits:\n  defaults:\n    start_budget_seconds: 2\n' >"$TMP/budget2.yaml"
expect run-stdin-dash-pipe 0 '^airlock: exit 0 ' -- sh -c "printf input | timeout 20 '$AIRLOCK' run --mechanism fake --stdin - -- cat"
expect run-stdin-dash-empty-pipe 0 '^airlock: exit 0 ' -- sh -c "true | timeout 20 '$AIRLOCK' run --mechanism fake --stdin - -- cat"
expect run-stdin-dash-file 0 '^airlock: exit 0 ' -- sh -c "timeout 20 '$AIRLOCK' run --mechanism fake --stdin - -- cat <'$TMP/stdin'"
expect run-stdin-process-substitution 0 '^airlock: exit 0 ' -- bash -c "timeout 20 '$AIRLOCK' run --mechanism fake --stdin <(sleep 0.5; printf input) -- cat"
mkfifo "$TMP/fifo"
expect run-stdin-fifo 0 '^airlock: exit 0 ' -- sh -c "(sleep 0.5; timeout 20 sh -c 'printf input >$TMP/fifo') & timeout 20 '$AIRLOCK' run --mechanism fake --config '$TMP/budget2.yaml' --stdin '$TMP/fifo' -- cat; s=\$?; wait; exit \$s"
expect run-stdin-fifo-no-writer 64 '^airlock run: --stdin .*/fifo: the pipe was not closed within the start budget of 2 s \(limits.defaults.start_budget_seconds\)' -- \
	timeout 20 "$AIRLOCK" run --mechanism fake --config "$TMP/budget2.yaml" --stdin "$TMP/fifo" -- cat
# A producer that keeps the pipe open and never writes: the subshell exits
# at once (the pipeline does not wait for its sleep), the sleep holds the
# write end until it is killed here.
expect run-stdin-pipe-never-closes 64 '^airlock run: --stdin -: the pipe was not closed within the start budget of 2 s \(limits.defaults.start_budget_seconds\)' -- \
	sh -c "(sleep 60 & echo \$! >'$TMP/sleeper') | timeout 20 '$AIRLOCK' run --mechanism fake --config '$TMP/budget2.yaml' --stdin - -- cat"
[ -s "$TMP/sleeper" ] && kill "$(cat "$TMP/sleeper")" 2>/dev/null
# A signal while the pipe is awaited ends airlock run at once, as one
# mid-command does (128 + the signal), not at the end of the budget.
printf '(sleep 60 & echo $! >"%s/sleeper2") | "%s" run --mechanism fake --stdin - -- cat &\np=$!; sleep 1; kill -TERM $p; wait $p; echo "status $?"\n' \
	"$TMP" "$AIRLOCK" >"$TMP/stdin-term.sh"
expect run-stdin-pipe-signal 0 '^status 143$' -- sh "$TMP/stdin-term.sh"
[ -s "$TMP/sleeper2" ] && kill "$(cat "$TMP/sleeper2")" 2>/dev/null
head -c 16M /dev/zero >"$TMP/at-cap"
head -c 17M /dev/zero >"$TMP/over-cap"
expect run-stdin-file-at-cap 0 '^airlock: exit 0 ' -- "$AIRLOCK" run --mechanism fake --stdin "$TMP/at-cap" -- cat
expect run-stdin-file-over-cap 64 '^airlock run: --stdin .*/over-cap: larger than the 16 MiB cap' -- "$AIRLOCK" run --mechanism fake --stdin "$TMP/over-cap" -- cat
expect run-stdin-pipe-at-cap 0 '^airlock: exit 0 ' -- sh -c "cat '$TMP/at-cap' | timeout 20 '$AIRLOCK' run --mechanism fake --stdin - -- cat"
expect run-stdin-pipe-over-cap 64 '^airlock run: --stdin -: larger than the 16 MiB cap' -- sh -c "cat '$TMP/over-cap' | timeout 20 '$AIRLOCK' run --mechanism fake --stdin - -- cat"
expect run-stdin-dir 64 'a directory, not a regular file or a pipe' -- "$AIRLOCK" run --mechanism fake --stdin "$TMP" -- cat
# The null device is an empty input, by name or as airlock run's own
# stdin (it was refused as a device); any other device still is refused.
expect run-stdin-dev-null 0 '^airlock: exit 0 ' -- "$AIRLOCK" run --mechanism fake --stdin /dev/null -- cat
expect run-stdin-dash-dev-null 0 '^airlock: exit 0 ' -- sh -c "timeout 20 '$AIRLOCK' run --mechanism fake --stdin - -- cat </dev/null"
expect run-stdin-device 64 '^airlock run: --stdin /dev/zero: not a regular file or a pipe \(a device or a socket\)' -- "$AIRLOCK" run --mechanism fake --stdin /dev/zero -- cat
printf 'limits:\n  defaults:\n    memory_bytes: 1M\n' >"$TMP/lowmem.yaml"
expect config-memory-floor 78 'limits.defaults: .*memory_bytes: 1048576 is below the 8388608 bytes' -- "$AIRLOCK" config check "$TMP/lowmem.yaml"
expect run-over-ceiling 65 'ceiling of 4096' -- "$AIRLOCK" run --mechanism fake --pids 5000 -- true
expect run-escape-cwd 65 'WorkspaceEscape' -- "$AIRLOCK" run --mechanism fake --cwd ../etc -- true
expect run-relative-argv0 65 'ToolValidationError' -- "$AIRLOCK" run --mechanism fake -- ./setup.sh
expect run-tier0-env 78 '^airlock run: ConfigurationError: --env: tier-1 name "AWS_SECRET_ACCESS_KEY" is a tier-0' -- "$AIRLOCK" run --mechanism fake --env AWS_SECRET_ACCESS_KEY -- true
expect run-bad-mechanism 78 'not one of' -- "$AIRLOCK" run --mechanism podman -- true
# Messages carry the bad input escaped: no control byte reaches the terminal.
ESC=$(printf '\033')
expect run-error-escaped 78 '^airlock run: ConfigurationError: --mechanism \\x1b\[2Jx: not one of' -- "$AIRLOCK" run --mechanism "${ESC}[2Jx" -- true
expect run-stdin-name-escaped 64 '^airlock run: --stdin .*/\\x1b\[2Jno: No such file' -- "$AIRLOCK" run --mechanism fake --stdin "$TMP/${ESC}[2Jno" -- true
# The native mechanism, for real, where this host can run it (root, cgroups,
# the default image in the store that scripts/test.sh builds). The store is
# the one the native suites use (tests/sandbox_testlib.h), so plain
# `meson test` runs these too.
NATIVE_CHECKS="run-native run-native-exit run-native-timeout run-native-memory run-native-files
run-native-stdin run-native-stdin-dash run-native-stdin-process-substitution
run-native-stdin-pipe-at-cap run-native-cwd-missing run-native-no-network run-native-not-found run-native-json
run-native-network run-native-network-logged run-native-network-refused
run-native-network-refused-logged run-native-policy-without-network
run-native-escaped-name run-native-escaped-name-no-esc run-native-small-workspace run-native-long-argv0
run-native-stdin-unread run-native-reader-closes run-native-reader-closes-status
run-native-reader-closes-summary run-native-reader-closes-said
run-native-sigTERM run-native-sigTERM-partial-output run-native-sigTERM-result
run-native-sigINT run-native-sigINT-partial-output run-native-sigINT-result
run-native-sigQUIT run-native-sigQUIT-partial-output run-native-sigQUIT-result
run-native-ignored-hup run-native-ignored-hup-ran"
STORE=${AIRLOCK_TEST_IMAGE_STORE:-/var/lib/airlock/images}
native_why=$("$AIRLOCK" doctor | sed -n 's/^native  *unavailable: //p')
if [ -z "$native_why" ] && ! "$AIRLOCK" doctor | grep -Eq '^native +available'; then
	native_why="airlock doctor does not list native"
fi
if [ -z "$native_why" ] && ! env AIRLOCK_IMAGE_STORE="$STORE" "$AIRLOCK" image ls 2>/dev/null | grep -q ' default$'; then
	native_why="no default image in $STORE (build it: AIRLOCK_IMAGE_STORE=$STORE airlock image build)"
fi
if [ -z "$native_why" ]; then
	export AIRLOCK_IMAGE_STORE=$STORE
	expect run-native 0 '^hello 1000 /workspace' -- "$AIRLOCK" run -- python3 -c 'import os; print("hello", os.getuid(), os.getcwd())'
	expect run-native-exit 3 'exit 3' -- "$AIRLOCK" run -- sh -c 'exit 3'
	expect run-native-timeout 137 'killed: TIMEOUT' -- "$AIRLOCK" run --timeout 1 -- sleep 30
	expect run-native-memory 137 'killed: MEMORY' -- "$AIRLOCK" run --memory 64M -- python3 -c 'x = bytearray(1 << 30)'
	expect run-native-files 0 'CREATED +out/r.csv \(3 bytes\)' -- "$AIRLOCK" run -- sh -c 'mkdir out && printf 1,2 > out/r.csv'
	expect run-native-stdin 0 '^input piped' -- "$AIRLOCK" run --stdin "$TMP/stdin" -- sh -c 'cat; echo " piped"'
	# Input on a pipe reaches the command whole: from airlock run's own
	# stdin, from a process substitution, and 16 MiB (the cap) of it.
	expect run-native-stdin-dash 0 '^piped in\.$' -- sh -c "printf 'piped in' | '$AIRLOCK' run --stdin - -- sh -c 'cat; echo .'"
	expect run-native-stdin-process-substitution 0 '^from a process\.$' -- \
		bash -c "'$AIRLOCK' run --stdin <(sleep 0.5; printf 'from a process') -- sh -c 'cat; echo .'"
	expect run-native-stdin-pipe-at-cap 0 '^16777216$' -- sh -c "cat '$TMP/at-cap' | '$AIRLOCK' run --stdin - -- sh -c 'wc -c'"
	expect run-native-cwd-missing 127 'working directory "/workspace/sub": No such file' -- "$AIRLOCK" run --cwd sub -- pwd
	expect run-native-no-network 1 'ENETUNREACH|unreachable' -- "$AIRLOCK" run -- python3 -c 'import socket; socket.create_connection(("198.51.100.7", 80), 3)'
	expect run-native-not-found 127 'cannot execute' -- "$AIRLOCK" run -- no-such-program
	expect run-native-json 0 '"killed_by":null' -- "$AIRLOCK" run --json -- true
	# Egress, both yeses: the policy and --network, inside the test world
	# (tests/egress/world.sh: a namespace of its own, hosts in 198.51.100.0/24).
	printf 'egress:\n  mode: allowlist\n  destinations:\n    - host: a.example.com\n      ports: [80]\n' >"$TMP/world.yaml"
	WORLD="sh $SRC/tests/egress/world.sh"
	expect run-native-network 0 '^hello from a' -- $WORLD "$AIRLOCK" run --network --policy "$TMP/world.yaml" \
		--dns 198.51.100.53 --proxy-log "$TMP/proxy.log" -- curl -sS --max-time 20 -p http://a.example.com/
	expect run-native-network-logged 0 '"host":"a\.example\.com","port":80,.*"outcome":"allowed"' -- cat "$TMP/proxy.log"
	expect run-native-network-refused 56 '403' -- $WORLD "$AIRLOCK" run --network --policy "$TMP/world.yaml" \
		--dns 198.51.100.53 --proxy-log "$TMP/proxy.log" -- curl -sS --max-time 20 -p http://b.example.com/
	expect run-native-network-refused-logged 0 '"host":"b\.example\.com".*"reason":"NOT_ALLOWLISTED"' -- cat "$TMP/proxy.log"
	# One yes is not enough: no proxy variable, nothing listening.
	expect run-native-policy-without-network 7 'without --network the sandbox has no network' -- $WORLD "$AIRLOCK" run \
		--policy "$TMP/world.yaml" -- curl -sS --max-time 20 -p -x http://127.0.0.1:3128 http://a.example.com/
	# Nothing a command or a reader does kills the service (SIGPIPE), and
	# a signal to it ends the command with a result; every path destroys
	# the sandbox. A leftover is a group that appeared during the run, is
	# still there after it, and whose lock no live service holds, for two
	# seconds on end (other suites on this host create and remove their
	# own groups concurrently: one caught between mkdir and flock, or
	# between unlock and rmdir, is theirs and gone a moment later).
	cg_list() { find /sys/fs/cgroup -maxdepth 6 -type d -name 'airlock-*' 2>/dev/null | sort; }
	cg_unlocked() { while read -r d; do flock -n "$d" true 2>/dev/null && echo "$d"; done; }
	cg_leftovers() {
		cg_list | comm -13 "$1" - | cg_unlocked >"$TMP/cg.cand"
		for _ in 1 2 3 4; do
			[ -s "$TMP/cg.cand" ] || break
			sleep 0.5
			cg_unlocked <"$TMP/cg.cand" >"$TMP/cg.still"
			mv "$TMP/cg.still" "$TMP/cg.cand"
		done
		sed 's/^/leftover /' "$TMP/cg.cand"
	}
	# expect_clean NAME WANT_EXIT PATTERN -- CMD...: expect, then no leftover group.
	expect_clean() {
		cg_list >"$TMP/cg.before"
		expect "$@"
		cg_leftovers "$TMP/cg.before" >"$TMP/cg.left"
		if [ -s "$TMP/cg.left" ]; then
			echo "FAIL $1: cgroups left behind"; sed 's/^/    /' "$TMP/cg.left"; fail=$((fail + 1))
		else
			echo "ok   $1-no-leftover-cgroups"; pass=$((pass + 1))
		fi
	}
	# A file name made of terminal controls cannot erase the real summary
	# (exit 1) and print a fake one: every control byte is escaped.
	expect run-native-escaped-name 1 '^airlock:   CREATED +\\x1b\[1A\\x1b\[2K\\x0dairlock: exit 0 fake \(1 bytes\)$' -- \
		"$AIRLOCK" run -- sh -c 'printf x >"$(printf "\033[1A\033[2K\rairlock: exit 0 fake")"; exit 1'
	if grep -q "$(printf '\033')" "$TMP/out"; then
		echo "FAIL run-native-escaped-name-no-esc: a raw ESC reached the terminal"; fail=$((fail + 1))
	else
		echo "ok   run-native-escaped-name-no-esc"; pass=$((pass + 1))
	fi
	# A small workspace with the default inodes: what fits, said.
	expect run-native-small-workspace 0 'holds 65526 inodes: provisioning inodes_max=65526 \(asked 100000\)' -- \
		"$AIRLOCK" run --workspace-bytes 32M -- true
	# An argv[0] longer than any message buffer still gets its message.
	long=$(printf '%05000d' 0 | tr 0 a)
	expect run-native-long-argv0 127 'cannot execute "a{64}"\.\.\.\(5000 bytes\): No such file' -- "$AIRLOCK" run -- "$long"
	head -c 200000 /dev/zero >"$TMP/big.in"
	expect_clean run-native-stdin-unread 0 '^airlock: exit 0 ' -- "$AIRLOCK" run --stdin "$TMP/big.in" -- true
	# The reader goes away after 10 bytes of a 1 MB output: airlock run
	# stops writing, still prints the summary on stderr, exits 74.
	printf '"%s" run -- sh -c "yes | head -c 1000000" 2>"%s/pipe.err"; echo "status $?" >"%s/pipe.st"\n' \
		"$AIRLOCK" "$TMP" "$TMP" >"$TMP/pipe.sh"
	expect_clean run-native-reader-closes 0 '^y$' -- sh -c "sh '$TMP/pipe.sh' | head -c 10"
	expect run-native-reader-closes-status 0 '^status 74$' -- cat "$TMP/pipe.st"
	expect run-native-reader-closes-summary 0 '^airlock: exit 0 ' -- cat "$TMP/pipe.err"
	expect run-native-reader-closes-said 0 'stdout: Broken pipe: the result was not fully printed' -- cat "$TMP/pipe.err"
	# A signal ignored when airlock run starts (SIGHUP under nohup) stays
	# ignored: the command runs to its end.
	printf '(trap "" HUP; exec "%s" run -- sh -c "sleep 2; echo done") &\np=$!; sleep 1; kill -HUP $p; wait $p; echo "status $?"\n' \
		"$AIRLOCK" >"$TMP/hup.sh"
	expect_clean run-native-ignored-hup 0 '^status 0$' -- sh -c "sh '$TMP/hup.sh' >'$TMP/hup.out' 2>&1; cat '$TMP/hup.out'"
	expect run-native-ignored-hup-ran 0 '^done$' -- cat "$TMP/hup.out"
	# SIGTERM and SIGINT mid-command: the command ends with its result.
	for s in TERM:143 INT:130 QUIT:131; do
		sig=${s%:*} want=${s#*:}
		{
			# An asynchronous list starts with SIGINT and SIGQUIT ignored (POSIX); put them back.
			echo "env --default-signal=INT,QUIT \"$AIRLOCK\" run -- sh -c 'printf started; exec sleep 31.$want' &"
			echo 'p=$!; i=0'
			echo "while [ \$i -lt 300 ] && ! pgrep -xf 'sleep 31.$want' >/dev/null; do sleep 0.1; i=\$((i + 1)); done"
			echo "kill -$sig \$p; wait \$p; echo \"status \$?\""
		} >"$TMP/sig.sh"
		expect_clean "run-native-sig$sig" 0 "^status $want\$" -- sh -c "sh '$TMP/sig.sh' >'$TMP/sig.out' 2>&1; cat '$TMP/sig.out'"
		expect "run-native-sig$sig-partial-output" 0 '^started' -- cat "$TMP/sig.out"
		expect "run-native-sig$sig-result" 0 'airlock: killed: SERVICE_SHUTDOWN ' -- cat "$TMP/sig.out"
	done
	unset AIRLOCK_IMAGE_STORE
else
	# shellcheck disable=SC2086 # the list is split on purpose
	skipped "native mechanism unavailable: $native_why" $NATIVE_CHECKS
fi

# airlock run --service: the CLI as a client of a running `airlock serve`
# (the remote adapter). Flags first, then a service that is not there (the
# ExecutionUnavailable exit code and a message naming the address), then,
# with a service started here over native, the same stdout, exit code and
# --json result shape as in process for an exit 3, a timeout and an output
# limit.
umask_was=$(umask)
umask 077
printf 'cli-test-service-credential-0123456789abcdef' >"$TMP/cred"
umask "$umask_was"
expect run-service-needs-credential 64 '--service needs --credential-file' -- "$AIRLOCK" run --service "unix:$TMP/api.sock" -- true
expect run-credential-needs-service 64 '--credential-file and --tls-\* are for --service' -- "$AIRLOCK" run --credential-file "$TMP/cred" -- true
expect run-service-cert-needs-key 64 '--tls-cert and --tls-key go together' -- "$AIRLOCK" run --service 127.0.0.1:1 --credential-file "$TMP/cred" --tls-cert "$TMP/cert.pem" -- true
expect run-service-no-mechanism 64 '--mechanism is the service' -- "$AIRLOCK" run --service "unix:$TMP/api.sock" --credential-file "$TMP/cred" --mechanism fake -- true
expect run-service-no-local-proxy 64 'the service holds the proxy' -- "$AIRLOCK" run --service "unix:$TMP/api.sock" --credential-file "$TMP/cred" --network --policy "$TMP/allow.yaml" --dns 198.51.100.53 -- true
expect run-service-bad-address 78 'neither unix:PATH nor HOST:PORT' -- "$AIRLOCK" run --service nowhere --credential-file "$TMP/cred" -- true
expect run-service-unreachable 69 "ExecutionUnavailable: .*unix:$TMP/nobody.sock is unreachable" -- "$AIRLOCK" run --service "unix:$TMP/nobody.sock" --credential-file "$TMP/cred" -- true
chmod 0644 "$TMP/cred"
expect run-service-open-credential 78 'cred' -- "$AIRLOCK" run --service "unix:$TMP/api.sock" --credential-file "$TMP/cred" -- true
chmod 0600 "$TMP/cred"
if grep -q 'cli-test-service-credential' "$TMP/out"; then
	echo "FAIL run-service-credential-not-shown"; fail=$((fail + 1))
else
	echo "ok   run-service-credential-not-shown"; pass=$((pass + 1))
fi

# A service over fake needs no root: the client learns the mechanism from
# the service's health and says what the fake says.
if "$AIRLOCK" serve --help 2>&1 | grep -q -- '--listen'; then
	printf 'sandbox:\n  mechanism: fake\n' >"$TMP/serve-fake.yaml"
	# The service refuses an environment that holds a credential-like name
	# (the test runner's own variables): it starts with only what it needs.
	env -i PATH="$PATH" "$AIRLOCK" serve --config "$TMP/serve-fake.yaml" --listen "unix:$TMP/fake.sock" --credential-file "$TMP/cred" >"$TMP/serve-fake.log" 2>&1 &
	fake_pid=$!
	i=0
	while [ $i -lt 300 ] && [ ! -S "$TMP/fake.sock" ] && kill -0 "$fake_pid" 2>/dev/null; do
		sleep 0.1; i=$((i + 1))
	done
	expect run-service-fake 0 'fake mechanism: nothing was executed' -- "$AIRLOCK" run --service "unix:$TMP/fake.sock" --credential-file "$TMP/cred" -- echo hi
	printf 'cli-test-service-credential-refused-000000' >"$TMP/wrong-cred"
	chmod 0600 "$TMP/wrong-cred"
	expect run-service-wrong-credential 78 'refused the service credential' -- "$AIRLOCK" run --service "unix:$TMP/fake.sock" --credential-file "$TMP/wrong-cred" -- true
	kill "$fake_pid"
	wait "$fake_pid"
else
	skipped "airlock serve is not built yet (no --listen)" run-service-fake run-service-wrong-credential
fi

# airlock tool and doctor against a worker: airlock serve (fake) and
# airlock worker in tokens mode on Unix sockets. The tool's answers as JSON
# with the command's exit status, the worker's refusals with its address,
# status, class and message, the token read as a credential and never
# shown; doctor's worker lines, ok and FAIL.
WT=$TMP/wt
mkdir -m 700 "$WT"
umask_was=$(umask)
umask 077
printf 'cli-test-worker-token-a-0123456789\n' >"$WT/token-a"
printf 'cli-test-worker-token-a-0123456789 tenant-a\n' >"$WT/tokens"
printf 'cli-test-worker-reaper-0123456789\n' >"$WT/reaper"
printf 'sandbox:\n  mechanism: fake\nworker:\n  listen: unix:%s/w.sock\n  state_dir: %s\n  auth_mode: tokens\n  tokens_file: %s/tokens\n  service_address: unix:%s/svc.sock\n  service_credential_file: %s/cred\n  reaper_credential_file: %s/reaper\n  artifact_size_max: 4194304\n' \
	"$WT" "$WT" "$WT" "$WT" "$TMP" "$WT" >"$WT/worker.yaml"
umask "$umask_was"
TOOL="--config $WT/worker.yaml --token-file $WT/token-a"
expect tool-no-sub 64 'usage: airlock tool' -- "$AIRLOCK" tool
expect tool-unknown-sub 64 "unknown subcommand 'frob'" -- "$AIRLOCK" tool frob
expect tool-worker-down 69 "^airlock tool list: ExecutionUnavailable: the worker at unix:$WT/w.sock is unreachable" -- "$AIRLOCK" tool list $TOOL
expect doctor-worker-down 69 "^worker database +FAIL: sqlite, $WT/worker.db: No such file or directory \(the worker creates it at its first start\); the worker at unix:$WT/w.sock is unreachable.*start the worker" -- "$AIRLOCK" doctor $TOOL
expect doctor-service-down 69 "^worker service +FAIL: the execution service at unix:$WT/svc.sock is unreachable.*start the execution service" -- "$AIRLOCK" doctor $TOOL
env -i PATH="$PATH" "$AIRLOCK" serve --config "$TMP/serve-fake.yaml" --listen "unix:$WT/svc.sock" --credential-file "$TMP/cred" >"$WT/serve.log" 2>&1 &
wt_svc=$!
env -i PATH="$PATH" "$AIRLOCK" worker --config "$WT/worker.yaml" >"$WT/worker.log" 2>&1 &
wt_worker=$!
i=0
while [ $i -lt 300 ] && { [ ! -S "$WT/w.sock" ] || [ ! -S "$WT/svc.sock" ]; } && kill -0 "$wt_worker" 2>/dev/null; do
	sleep 0.1; i=$((i + 1))
done
[ -S "$WT/w.sock" ] || { echo "airlock worker did not start:"; sed 's/^/    /' "$WT/worker.log"; }
expect tool-list 0 '^      "name": "sandbox.run_command",' -- "$AIRLOCK" tool list $TOOL
expect tool-no-token 65 "^airlock tool list: the worker at unix:$WT/w.sock answered 401: ExecutionRejected: .*--token-file" -- "$AIRLOCK" tool list --config "$WT/worker.yaml"
chmod 0644 "$WT/token-a"
expect tool-token-open 78 "worker token file $WT/token-a .*(group|others)" -- "$AIRLOCK" tool list $TOOL
chmod 0600 "$WT/token-a"
if grep -q 'cli-test-worker-token' "$TMP/out"; then
	echo "FAIL tool-token-not-shown"; fail=$((fail + 1))
else
	echo "ok   tool-token-not-shown"; pass=$((pass + 1))
fi
expect tool-lease-other-tenant 65 'answered 403: ExecutionRejected' -- "$AIRLOCK" tool lease run-1 --epoch 1 $TOOL
expect tool-lease 0 '^  "outcome": "new",' -- "$AIRLOCK" tool lease run-1 --epoch 1 --tenant tenant-a $TOOL
expect tool-call 0 '^  "exit_code": 0,' -- "$AIRLOCK" tool call run-1 sandbox.run_command '{"command": ["echo", "hi"]}' --epoch 1 $TOOL
expect tool-call-export-text 0 '^  "sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",' -- "$AIRLOCK" tool call run-1 artifact.export '{"text": "hello"}' --epoch 1 $TOOL
expect tool-call-export-missing 65 'answered 400: ToolValidationError: artifact.export.arguments.path' -- "$AIRLOCK" tool call run-1 artifact.export '{"path": "nothing-here"}' --epoch 1 $TOOL
expect tool-call-unknown-name 65 "^airlock tool call: the worker at unix:$WT/w.sock answered 404: ExecutionRejected: no such route \(the worker serves no tool of that name: airlock tool list\)" -- "$AIRLOCK" tool call run-1 sandbox.nothing '{"command": ["true"]}' --epoch 1 $TOOL
expect tool-call-dots 65 'answered 404: ExecutionRejected: no such route' -- "$AIRLOCK" tool call run-1 .. '{"command": ["true"]}' --epoch 1 $TOOL
expect tool-call-no-lease 65 'answered 404: ExecutionRejected: no such run' -- "$AIRLOCK" tool call run-2 sandbox.run_command '{"command": ["true"]}' --epoch 1 $TOOL
expect tool-call-other-epoch 65 'answered 409: ExecutionRejected' -- "$AIRLOCK" tool call run-1 sandbox.run_command '{"command": ["true"]}' --epoch 2 $TOOL
expect tool-call-validation 65 'answered 400: ToolValidationError: arguments.command: got a string' -- "$AIRLOCK" tool call run-1 sandbox.run_command '{"command": "echo hi"}' --epoch 1 $TOOL
expect tool-call-not-object 64 "ToolValidationError: the tool's arguments must be a JSON object" -- "$AIRLOCK" tool call run-1 sandbox.run_command '["echo"]' --epoch 1 $TOOL
expect tool-call-no-epoch 64 'usage: airlock tool call' -- "$AIRLOCK" tool call run-1 sandbox.run_command '{"command": ["true"]}' $TOOL
expect tool-call-bad-epoch 64 '--epoch -1: not an integer' -- "$AIRLOCK" tool call run-1 sandbox.run_command '{}' --epoch -1 $TOOL
# What a message carries reaches the terminal escaped (the worker names no
# value it was sent, so the address is the bytes here).
expect tool-call-escaped 69 "the worker at unix:$WT/no\\\\x1b\\[2J\\.sock is unreachable" -- "$AIRLOCK" tool call run-1 sandbox.run_command '{"command": ["true"]}' --epoch 1 --worker "unix:$WT/no$(printf '\033')[2J.sock" $TOOL
if grep -q "$(printf '\033')" "$TMP/out"; then
	echo "FAIL tool-call-escaped-no-esc"; fail=$((fail + 1))
else
	echo "ok   tool-call-escaped-no-esc"; pass=$((pass + 1))
fi
expect doctor-worker 0 "^worker database +ok: sqlite, $WT/worker.db; the worker at unix:$WT/w.sock reports sqlite, schema version [0-9]+, auth_mode tokens" -- "$AIRLOCK" doctor $TOOL
expect doctor-worker-service 0 "^worker service +ok: the execution service at unix:$WT/svc.sock answers: mechanism fake" -- "$AIRLOCK" doctor $TOOL
expect doctor-worker-no-token 69 '^worker database +FAIL: .*answered HTTP 401.*--token-file' -- "$AIRLOCK" doctor --config "$WT/worker.yaml"
# docs/worker-openapi.yaml asked of the worker: each path with each
# method is routed (neither 405 nor "no such route") exactly when the file
# has the operation, 405 otherwise.
if python3 - "$SRC/docs/worker-openapi.yaml" "$WT/w.sock" >"$WT/probe.out" 2>&1 <<'PY'
import http.client, socket, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
bad = []
for path, item in doc["paths"].items():
    target = path.replace("{run_id}", "run-probe")
    token = "cli-test-worker-reaper-0123456789" if "reaper" in path else "cli-test-worker-token-a-0123456789"
    for m in ("GET", "PUT", "POST", "DELETE"):
        # One write: the worker may answer (405, 404) and close before
        # it reads a body.
        body = "{}" if m in ("PUT", "POST") else ""
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[2])
        s.sendall((f"{m} {target} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                   f"Connection: close\r\n\r\n{body}").encode())
        r = http.client.HTTPResponse(s)
        r.begin()
        body = r.read().decode(errors="replace")
        s.close()
        routed = r.status != 405 and "no such route" not in body
        if routed != (m.lower() in item):
            bad.append(f"{m} {target}: {r.status} {body}")
print("\n".join(bad) or "every operation routed, every other method 405")
sys.exit(1 if bad else 0)
PY
then echo "ok   worker-openapi-routes"; pass=$((pass + 1)); else echo "FAIL worker-openapi-routes"; sed 's/^/    /' "$WT/probe.out"; fail=$((fail + 1)); fi
expect tool-release 0 'the claim at epoch 1 is over' -- "$AIRLOCK" tool release run-1 --epoch 1 $TOOL
expect tool-call-released 65 'answered 409: ExecutionRejected' -- "$AIRLOCK" tool call run-1 sandbox.run_command '{"command": ["true"]}' --epoch 1 $TOOL
# airlock artifact against the same worker: a few MiB put, listed, got
# back byte for byte; a get that fails leaves an existing -o file as it
# was and no temporary beside it; rm, then nothing to get.
AT=$WT/art
mkdir -m 700 "$AT"
head -c 3145728 /dev/urandom >"$AT/blob"
printf 'old contents\n' >"$AT/keep"
expect artifact-put 0 '^  "media_type": "application/x-test"$' -- "$AIRLOCK" artifact put "$AT/blob" --filename 'blob one.bin' --media-type application/x-test $TOOL
cp "$TMP/out" "$AT/put.out"
art_id=$(sed -n 's/^  "artifact_id": "\([0-9a-f-]*\)",$/\1/p' "$AT/put.out")
art_sha=$(sha256sum "$AT/blob" | cut -d' ' -f1)
expect artifact-put-digest 0 "^  \"sha256\": \"$art_sha\"," -- cat "$AT/put.out"
expect artifact-put-bad-media 65 "answered 400: .*media_type" -- "$AIRLOCK" artifact put "$AT/blob" --media-type 'not a type' $TOOL
head -c 5242880 /dev/zero >"$AT/big"
expect artifact-put-too-large 65 "answered 413: ToolValidationError: the body is larger than this request.s cap of 4194304 bytes" -- "$AIRLOCK" artifact put "$AT/big" $TOOL
rm "$AT/big"
expect artifact-put-missing 65 "^airlock artifact put: $AT/nothing: No such file" -- "$AIRLOCK" artifact put "$AT/nothing" $TOOL
expect artifact-put-dir 70 "not a regular file" -- "$AIRLOCK" artifact put "$AT" $TOOL
expect artifact-ls 0 "\"artifact_id\":\"$art_id\".*\"filename\":\"blob one.bin\"" -- "$AIRLOCK" artifact ls $TOOL
# A name of any bytes is metadata; what shows it escapes it.
expect artifact-put-odd-name 0 '"size_bytes": 13' -- "$AIRLOCK" artifact put "$AT/keep" --filename "$(printf 'a\033[2J\342\200\256b')" $TOOL
odd_id=$(sed -n 's/^  "artifact_id": "\([0-9a-f-]*\)",$/\1/p' "$TMP/out")
expect artifact-ls-odd-name 0 '"filename":"a\\u001B\[2J\\u202Eb"' -- "$AIRLOCK" artifact ls $TOOL
if grep -q "$(printf '\033')" "$TMP/out" || grep -q "$(printf '\342\200\256')" "$TMP/out"; then
	echo "FAIL artifact-ls-odd-name-escaped"; fail=$((fail + 1))
else
	echo "ok   artifact-ls-odd-name-escaped"; pass=$((pass + 1))
fi
expect artifact-get-odd-name 0 '"filename": "a\\u001B\[2J\\u202Eb"' -- "$AIRLOCK" artifact get "$odd_id" -o "$AT/odd" $TOOL
expect artifact-rm-odd-name 0 "$odd_id removed" -- "$AIRLOCK" artifact rm "$odd_id" $TOOL
rm -f "$AT/odd"
expect artifact-ls-json 0 '' -- sh -c '"$0" artifact ls "$@" | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if len(d[\"artifacts\"]) >= 1 else 1)"' "$AIRLOCK" $TOOL
expect artifact-ls-limit 0 '' -- sh -c '"$0" artifact ls --limit 1 "$@" | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if len(d[\"artifacts\"]) == 1 else 1)"' "$AIRLOCK" $TOOL
expect artifact-get 0 "^  \"size_bytes\": 3145728," -- "$AIRLOCK" artifact get "$art_id" -o "$AT/copy" $TOOL
expect artifact-get-same 0 '' -- cmp "$AT/blob" "$AT/copy"
expect artifact-get-mode 0 '^600$' -- stat -c %a "$AT/copy"
expect artifact-get-stdout 0 '' -- sh -c '"$0" artifact get "$1" "$2" "$3" "$4" "$5" | cmp - "$6"' "$AIRLOCK" "$art_id" $TOOL "$AT/blob"
expect artifact-get-missing 65 "answered 404: ExecutionRejected: no such artifact" -- "$AIRLOCK" artifact get 0192d3f5-0000-7000-8000-000000000000 -o "$AT/keep" $TOOL
expect artifact-get-kept 0 '^old contents$' -- cat "$AT/keep"
# A worker that lies (a fake one on a Unix socket): bytes that are not
# the metadata's digest, a transfer cut short of its Content-Length, an
# ETag of other bytes. Each get fails naming both digests or the cut, the
# file named by -o stays as it was, and no temporary is left.
cat >"$AT/fake.py" <<'PY'
import hashlib, http.server, socketserver, sys
good = b"hello"
digest = hashlib.sha256(good).hexdigest()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        parts = self.path.split("/")
        if len(parts) == 4:
            body = ('{"artifact_id": "%s", "size_bytes": 5, "sha256": "%s"}' % (parts[3], digest)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        kind = parts[3]
        data = {"tampered": b"jello", "cut": b"hel", "etag": good}[kind]
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.send_header("ETag", '"sha256:%s"' % (digest if kind != "etag" else "0" * 64))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True
class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
S(sys.argv[1], H).serve_forever()
PY
python3 "$AT/fake.py" "$AT/fake.sock" &
fake_worker=$!
i=0
while [ $i -lt 100 ] && [ ! -S "$AT/fake.sock" ]; do sleep 0.1; i=$((i + 1)); done
FAKE="--config $WT/worker.yaml --worker unix:$AT/fake.sock"
hello_sha=2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824
expect artifact-get-tampered 70 "ArtifactIntegrityError: the bytes received have sha256 [0-9a-f]{64}, the artifact's metadata says $hello_sha" -- "$AIRLOCK" artifact get tampered -o "$AT/keep" $FAKE
expect artifact-get-tampered-kept 0 '^old contents$' -- cat "$AT/keep"
expect artifact-get-cut 69 "ExecutionUnavailable: .*unix:$AT/fake.sock" -- "$AIRLOCK" artifact get cut -o "$AT/keep" $FAKE
expect artifact-get-cut-kept 0 '^old contents$' -- cat "$AT/keep"
expect artifact-get-etag 70 "ArtifactIntegrityError: the download's ETag is not \"sha256:$hello_sha\"" -- "$AIRLOCK" artifact get etag -o "$AT/keep" $FAKE
expect artifact-get-etag-kept 0 '^old contents$' -- cat "$AT/keep"
expect artifact-get-tampered-stdout 70 "the bytes written to stdout are not the artifact: ArtifactIntegrity|bytes written to stdout are not the artifact" -- sh -c '"$0" artifact get tampered "$@" >/dev/null' "$AIRLOCK" $FAKE
expect artifact-get-fake-no-temp 0 '^blob copy fake.py fake.sock keep put.out$' -- sh -c 'echo $(ls -A "$0")' "$AT"
kill "$fake_worker"
wait "$fake_worker"
expect artifact-get-bad-id 65 "artifact id is not 1 to 64" -- "$AIRLOCK" artifact get '../x' -o "$AT/keep" $TOOL
expect artifact-rm 0 "$art_id removed" -- "$AIRLOCK" artifact rm "$art_id" $TOOL
expect artifact-get-removed 65 "answered 404: ExecutionRejected: no such artifact" -- "$AIRLOCK" artifact get "$art_id" -o "$AT/keep" $TOOL
expect artifact-rm-again 65 "answered 404" -- "$AIRLOCK" artifact rm "$art_id" $TOOL
expect artifact-get-kept-2 0 '^old contents$' -- cat "$AT/keep"
kill "$wt_worker" "$wt_svc"
wait "$wt_worker" "$wt_svc"

SERVICE_CHECKS="run-service-exit run-service-exit-same run-service-timeout run-service-timeout-same
run-service-output-limit run-service-output-limit-same run-service-json-same tool-native-lease
tool-native-exit tool-native-killed"
serve_why=
if ! "$AIRLOCK" serve --help 2>&1 | grep -q -- '--listen'; then
	serve_why="airlock serve is not built yet (no --listen)"
elif [ -n "$native_why" ]; then
	serve_why="native mechanism unavailable: $native_why"
fi
if [ -z "$serve_why" ]; then
	export AIRLOCK_IMAGE_STORE=$STORE
	printf 'sandbox:\n  mechanism: native\n' >"$TMP/serve.yaml"
	env -i PATH="$PATH" AIRLOCK_IMAGE_STORE="$STORE" "$AIRLOCK" serve --config "$TMP/serve.yaml" --listen "unix:$TMP/api.sock" --credential-file "$TMP/cred" >"$TMP/serve.log" 2>&1 &
	serve_pid=$!
	i=0
	while [ $i -lt 300 ] && [ ! -S "$TMP/api.sock" ] && kill -0 "$serve_pid" 2>/dev/null; do
		sleep 0.1; i=$((i + 1))
	done
	[ -S "$TMP/api.sock" ] || { echo "airlock serve did not start:"; sed 's/^/    /' "$TMP/serve.log"; }
	SVC="--service unix:$TMP/api.sock --credential-file $TMP/cred"
	# same NAME WANT_EXIT -- ARGS...: in process and through the service,
	# the exit code (expect) and the command's stdout byte for byte.
	same() {
		name=$1 want=$2
		shift 3
		"$AIRLOCK" run "$@" >"$TMP/local.out" 2>/dev/null
		local_rc=$?
		# shellcheck disable=SC2086 # SVC is split on purpose
		"$AIRLOCK" run $SVC "$@" >"$TMP/remote.out" 2>"$TMP/remote.err"
		remote_rc=$?
		if [ "$remote_rc" = "$want" ] && [ "$local_rc" = "$want" ]; then
			echo "ok   $name"; pass=$((pass + 1))
		else
			echo "FAIL $name: exit $remote_rc through the service, $local_rc in process, want $want"
			sed 's/^/    /' "$TMP/remote.err"; fail=$((fail + 1))
		fi
		if cmp -s "$TMP/local.out" "$TMP/remote.out"; then
			echo "ok   $name-same"; pass=$((pass + 1))
		else
			echo "FAIL $name-same: stdout differs"; fail=$((fail + 1))
		fi
	}
	same run-service-exit 3 -- -- sh -c 'printf out; printf err >&2; exit 3'
	same run-service-timeout 137 -- --timeout 1 -- sh -c 'printf started; exec sleep 30'
	same run-service-output-limit 137 -- --output-limit 1000 -- sh -c "head -c 5000 /dev/zero | tr '\\0' a"
	"$AIRLOCK" run --json -- sh -c 'printf out; exit 3' >"$TMP/local.json" 2>/dev/null
	# shellcheck disable=SC2086
	"$AIRLOCK" run $SVC --json -- sh -c 'printf out; exit 3' >"$TMP/remote.json" 2>/dev/null
	if python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b):
    r.pop("duration_ms")
assert a == b, (a, b)
assert a["exit_code"] == 3 and a["stdout"] == "out", a
' "$TMP/local.json" "$TMP/remote.json"; then echo "ok   run-service-json-same"; pass=$((pass + 1)); else echo "FAIL run-service-json-same"; cat "$TMP/local.json" "$TMP/remote.json"; fail=$((fail + 1)); fi
	# airlock tool call's exit status is the command's, as airlock run's:
	# a worker in dev mode over this native service.
	img=$("$AIRLOCK" image ls 2>/dev/null | awk '/ default$/ {print $1}')
	mkdir -m 700 "$WT/n"
	printf 'sandbox:\n  image: %s\nworker:\n  listen: unix:%s/n/w.sock\n  state_dir: %s/n\n  auth_mode: dev\n  service_address: unix:%s/api.sock\n  service_credential_file: %s/cred\n' \
		"$img" "$WT" "$WT" "$TMP" "$TMP" >"$WT/native.yaml"
	env -i PATH="$PATH" "$AIRLOCK" worker --config "$WT/native.yaml" >"$WT/native.log" 2>&1 &
	wn_pid=$!
	i=0
	while [ $i -lt 300 ] && [ ! -S "$WT/n/w.sock" ] && kill -0 "$wn_pid" 2>/dev/null; do
		sleep 0.1; i=$((i + 1))
	done
	TOOLN="--config $WT/native.yaml"
	expect tool-native-lease 0 '"outcome": "new"' -- "$AIRLOCK" tool lease run-n --epoch 1 $TOOLN
	expect tool-native-exit 3 '^  "stdout": "out",' -- "$AIRLOCK" tool call run-n sandbox.run_command '{"command": ["sh", "-c", "printf out; exit 3"]}' --epoch 1 $TOOLN
	expect tool-native-killed 137 '^  "killed_by": "TIMEOUT",' -- "$AIRLOCK" tool call run-n sandbox.run_command '{"command": ["sleep", "30"], "timeout_seconds": 1}' --epoch 1 $TOOLN
	kill "$wn_pid"
	wait "$wn_pid"
	kill "$serve_pid"
	wait "$serve_pid"
	unset AIRLOCK_IMAGE_STORE
else
	# shellcheck disable=SC2086 # the list is split on purpose
	skipped "$serve_why" $SERVICE_CHECKS
fi

# The gvisor mechanism through the CLI, and in production: with
# deployment_mode production it is accepted, and it runs the image the
# settings pin (production never takes the store's newest).
GVISOR_CHECKS="doctor-gvisor run-gvisor run-gvisor-exit run-gvisor-memory run-gvisor-not-found
run-gvisor-ls run-gvisor-production-unpinned run-gvisor-production run-gvisor-production-network"
gvisor_why=$("$AIRLOCK" doctor | sed -n 's/^gvisor  *unavailable: //p')
if [ -z "$gvisor_why" ] && ! env AIRLOCK_IMAGE_STORE="$STORE" "$AIRLOCK" image ls 2>/dev/null | grep -q ' default$'; then
	gvisor_why="no default image in $STORE (build it: AIRLOCK_IMAGE_STORE=$STORE airlock image build)"
fi
if [ -z "$gvisor_why" ]; then
	export AIRLOCK_IMAGE_STORE=$STORE
	expect doctor-gvisor 0 '^gvisor +available, platform (ptrace|kvm) ' -- "$AIRLOCK" doctor
	expect run-gvisor 0 '^hello 1000 /workspace' -- "$AIRLOCK" run --mechanism gvisor -- python3 -c 'import os; print("hello", os.getuid(), os.getcwd())'
	expect run-gvisor-exit 3 'exit 3' -- "$AIRLOCK" run --mechanism gvisor -- sh -c 'exit 3'
	expect run-gvisor-memory 137 'killed: MEMORY' -- "$AIRLOCK" run --mechanism gvisor --memory 64M -- python3 -c 'x = bytearray(1 << 30)'
	expect run-gvisor-not-found 127 'cannot execute no-such-program: No such file' -- "$AIRLOCK" run --mechanism gvisor -- no-such-program
	expect run-gvisor-ls 0 'guest$' -- "$AIRLOCK" run --mechanism gvisor -- ls -l /usr/lib/airlock
	digest=$("$AIRLOCK" image ls | sed -n 's/^\(sha256:[0-9a-f]*\) .* default$/\1/p' | head -1)
	printf 'deployment_mode: production\nauth_mode: token\nsandbox:\n  mechanism: gvisor\n' >"$TMP/prod-unpinned.yaml"
	expect run-gvisor-production-unpinned 78 'production runs a pinned image' -- "$AIRLOCK" run --config "$TMP/prod-unpinned.yaml" -- true
	printf 'deployment_mode: production\nauth_mode: token\nsandbox:\n  mechanism: gvisor\n  image: %s\n' "$digest" >"$TMP/prod.yaml"
	expect run-gvisor-production 0 '^production ok' -- "$AIRLOCK" run --config "$TMP/prod.yaml" -- sh -c 'echo production ok'
	expect run-gvisor-production-network 1 'No route to host|ENETUNREACH|unreachable' -- "$AIRLOCK" run --config "$TMP/prod.yaml" -- python3 -c 'import socket; socket.create_connection(("198.51.100.7", 80), 3)'
	unset AIRLOCK_IMAGE_STORE
else
	# shellcheck disable=SC2086 # the list is split on purpose
	skipped "gvisor mechanism unavailable: $gvisor_why" $GVISOR_CHECKS
fi
# Egress flags.
printf 'egress:\n  mode: allowlist\n  destinations:\n    - host: a.example.com\n      ports: [80]\n' >"$TMP/allow.yaml"
expect run-network-needs-policy 64 '--network needs --policy FILE' -- "$AIRLOCK" run --network -- true
expect run-dns-needs-network 64 '--dns and --proxy-log configure the egress proxy' -- "$AIRLOCK" run --dns 198.51.100.53 -- true
printf 'egress:\n  mode: allow\n' >"$TMP/allow-mode.yaml"
expect run-network-bad-policy 78 'allow-mode\.yaml:2: mode: there is no allow mode' -- "$AIRLOCK" run --network --policy "$TMP/allow-mode.yaml" -- true
expect run-network-fake 69 'fake has no network' -- "$AIRLOCK" run --mechanism fake --network --policy "$TMP/allow.yaml" -- true
expect proxy-needs-policy 64 '--policy FILE is required' -- "$AIRLOCK" proxy
expect proxy-bad-listen 64 '--listen localhost:3128: expected a numeric IPv4' -- "$AIRLOCK" proxy --policy "$TMP/allow.yaml" --listen localhost:3128
expect proxy-bad-dns 78 '--dns: .*is not ADDR' -- "$AIRLOCK" proxy --policy "$TMP/allow.yaml" --dns dns.example
# serve names its own flag: a bad --dns before anything starts, and --dns
# with no allowlist to proxy for.
printf 'sandbox:\n  mechanism: fake\n' >"$TMP/serve-dns.yaml"
expect serve-bad-dns 78 '^airlock serve: ConfigurationError: --dns: .*is not ADDR' -- env -i PATH="$PATH" "$AIRLOCK" serve --config "$TMP/serve-dns.yaml" --listen "unix:$TMP/dns.sock" --credential-file "$TMP/cred" --dns dns.example
expect serve-dns-needs-policy 78 'DNS servers \(--dns\) configure the egress proxy, which runs only with an allowlist policy' -- env -i PATH="$PATH" "$AIRLOCK" serve --config "$TMP/serve-dns.yaml" --listen "unix:$TMP/dns.sock" --credential-file "$TMP/cred" --dns 198.51.100.53
# The proxy on its own, with a real client, in the test world.
STANDALONE_CHECKS="proxy-standalone-allowed proxy-standalone-refused proxy-standalone-stops proxy-standalone-log"
if [ "$(id -u)" != 0 ]; then
	# shellcheck disable=SC2086
	skipped "the test world needs root (network namespaces)" $STANDALONE_CHECKS
elif ! command -v curl >/dev/null; then
	# shellcheck disable=SC2086
	skipped "curl is not installed (scripts/setup.sh installs it)" $STANDALONE_CHECKS
else
	{
		echo "\"$AIRLOCK\" proxy --policy \"$TMP/allow.yaml\" --listen 127.0.0.1:3129 --dns 198.51.100.53 --log \"$TMP/standalone.log\" 2>\"$TMP/standalone.err\" &"
		echo 'p=$!; i=0'
		echo "while [ \$i -lt 100 ] && ! grep -q listening \"$TMP/standalone.err\"; do sleep 0.1; i=\$((i + 1)); done"
		echo 'curl -sS --max-time 20 -p -x http://127.0.0.1:3129 http://a.example.com/'
		echo 'curl -sS --max-time 20 -p -x http://127.0.0.1:3129 http://b.example.com/ 2>&1'
		echo 'kill $p; wait $p; echo "proxy exit $?"'
	} >"$TMP/standalone.sh"
	sh "$SRC/tests/egress/world.sh" sh "$TMP/standalone.sh" >"$TMP/standalone.out" 2>&1
	expect proxy-standalone-allowed 0 '^hello from a' -- cat "$TMP/standalone.out"
	expect proxy-standalone-refused 0 'CONNECT tunnel failed, response 403' -- cat "$TMP/standalone.out"
	expect proxy-standalone-stops 0 'proxy exit 0' -- cat "$TMP/standalone.out"
	expect proxy-standalone-log 0 '"host":"b\.example\.com".*"reason":"NOT_ALLOWLISTED"' -- cat "$TMP/standalone.log"
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

# egress validate (the check subcommand is tested with the evaluation function)
expect egress-no-subcommand 64 'usage: airlock egress' -- "$AIRLOCK" egress
expect egress-unknown-subcommand 64 "unknown subcommand 'frob'" -- "$AIRLOCK" egress frob
expect egress-validate-help 0 'usage: airlock egress validate FILE' -- "$AIRLOCK" egress validate --help
expect egress-validate-no-file 64 'usage: airlock egress validate' -- "$AIRLOCK" egress validate
expect egress-validate-two-files 64 'usage' -- "$AIRLOCK" egress validate a.yaml b.yaml
printf 'egress:\n  mode: allowlist\n  destinations:\n    - host: PyPI.org.\n      ports: [443]\n    - host: "*.pythonhosted.org"\n      ports: [443]\n' >"$TMP/egress-good.yaml"
expect egress-validate-good 0 'host: "pypi.org"' -- "$AIRLOCK" egress validate "$TMP/egress-good.yaml"
"$AIRLOCK" egress validate "$TMP/egress-good.yaml" >"$TMP/egress-normalized.yaml" 2>/dev/null
expect egress-validate-normalized-output 0 'host: "\*\.pythonhosted\.org"' -- "$AIRLOCK" egress validate "$TMP/egress-normalized.yaml"
printf 'egress:\n  mode: allowlist\n  destinations:\n    - host: pypi.org\n      ports: [443]\n    - host: 0x7f.1\n      ports: [443]\n' >"$TMP/egress-ip.yaml"
expect egress-validate-ip 2 'egress-ip\.yaml:6: destinations\[1\]\.host: .*an IP address is not a destination' -- "$AIRLOCK" egress validate "$TMP/egress-ip.yaml"
printf 'egress:\n  mode: allow\n' >"$TMP/egress-allow.yaml"
expect egress-validate-allow-mode 2 'egress-allow\.yaml:2: mode: there is no allow mode' -- "$AIRLOCK" egress validate "$TMP/egress-allow.yaml"
expect egress-validate-missing 2 'no-policy\.yaml: cannot open' -- "$AIRLOCK" egress validate "$TMP/no-policy.yaml"
# egress check: --resolve answers instead of DNS, so nothing here touches the network.
EGC="$AIRLOCK egress check --policy $TMP/egress-good.yaml"
expect egress-check-help 0 'usage: airlock egress check' -- "$AIRLOCK" egress check --help
expect egress-check-allowed 0 '^\{"decision":"allow","reason":"ALLOWED","host":"pypi\.org","port":443,"addresses":\["198\.51\.100\.10","2606:4700::10"\],"dial":"198\.51\.100\.10"\}$' -- $EGC --resolve PyPI.org=198.51.100.10,2606:4700::10 pypi.org 443
expect egress-check-wildcard 0 '"host":"files\.pythonhosted\.org".*"dial":"198\.51\.100\.11"' -- $EGC --resolve files.pythonhosted.org=198.51.100.11 FILES.pythonhosted.org. 443
expect egress-check-metadata-mapped 1 '"decision":"deny","reason":"METADATA_ADDRESS".*"addresses":\["198\.51\.100\.10","::ffff:169\.254\.169\.254"\],"dial":null' -- $EGC --resolve pypi.org=198.51.100.10,::ffff:169.254.169.254 pypi.org 443
expect egress-check-private 1 '"reason":"DENIED_ADDRESS".*"addresses":\["10\.0\.0\.7"\],"dial":null' -- $EGC --resolve pypi.org=10.0.0.7 pypi.org 443
expect egress-check-port-not-allowed 1 '"reason":"PORT_NOT_ALLOWED","host":"pypi\.org","port":8443' -- $EGC --resolve pypi.org=198.51.100.10 pypi.org 8443
expect egress-check-not-allowlisted 1 '"reason":"NOT_ALLOWLISTED"' -- $EGC --resolve example.org=198.51.100.10 example.org 443
expect egress-check-ip-literal 1 '"reason":"IP_LITERAL"' -- $EGC 0x7f.1 443
printf 'egress:\n  mode: deny\n' >"$TMP/egress-deny.yaml"
expect egress-check-mode-deny 1 '"reason":"MODE_DENY"' -- "$AIRLOCK" egress check --policy "$TMP/egress-deny.yaml" --resolve pypi.org=198.51.100.10 pypi.org 443
expect egress-check-bad-policy 2 'egress-allow\.yaml:2: mode: there is no allow mode' -- "$AIRLOCK" egress check --policy "$TMP/egress-allow.yaml" pypi.org 443
expect egress-check-no-policy 64 'usage: airlock egress check' -- "$AIRLOCK" egress check pypi.org 443
expect egress-check-bad-port 64 'port "0" is not 1\.\.65535' -- $EGC pypi.org 0
expect egress-check-port-leading-zero 64 'port "0443" is not 1\.\.65535' -- $EGC pypi.org 0443
expect egress-check-port-sign 64 'port "\+443" is not 1\.\.65535' -- $EGC pypi.org +443
expect egress-check-bad-resolve 64 '"1\.2\.3" is not an address' -- $EGC --resolve pypi.org=1.2.3 pypi.org 443
expect egress-check-bad-dns 64 'is not ADDR\[:PORT\]' -- $EGC --dns dns.example pypi.org 443

echo "cli: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
