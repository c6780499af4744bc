#!/bin/sh
# airlock mcp with the official MCP TypeScript SDK's client
# (tests/mcp/client_test.mjs), embedded with the fake mechanism and, where
# this host runs it, the native one; then against a real airlock-worker.
#
# The SDK is installed from npm into BUILD/mcp-sdk exactly as
# tests/mcp/package-lock.json locks it (npm ci: every package's version
# and integrity digest), with npm's cache beside it: a second run finds it
# installed and installs nothing.
#
# Usage: mcp_sdk_test.sh AIRLOCK SRCDIR BUILDDIR
set -u
AIRLOCK=$1
SRC=$2
BUILD=$3
SDK=$BUILD/mcp-sdk
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM

unset AIRLOCK_DEPLOYMENT_MODE AIRLOCK_SANDBOX_MECHANISM AIRLOCK_SANDBOX_IMAGE

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "FAIL mcp-sdk: node and npm are needed (scripts/setup.sh installs them)"
	exit 1
fi
want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dependencies"]["@modelcontextprotocol/sdk"])' "$SRC/tests/mcp/package.json")
have=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' \
	"$SDK/node_modules/@modelcontextprotocol/sdk/package.json" 2>/dev/null || true)
if [ "$have" != "$want" ]; then
	echo "mcp-sdk: installing @modelcontextprotocol/sdk $want into $SDK"
	mkdir -p "$SDK"
	cp "$SRC/tests/mcp/package.json" "$SRC/tests/mcp/package-lock.json" "$SDK/"
	if ! (cd "$SDK" && npm ci --no-audit --no-fund --cache "$SDK/.npm-cache" >"$TMP/npm.log" 2>&1); then
		echo "FAIL mcp-sdk: npm install failed:"; sed 's/^/    /' "$TMP/npm.log"
		exit 1
	fi
else
	echo "mcp-sdk: @modelcontextprotocol/sdk $want already installed in $SDK"
fi

status=0
run() {
	mode=$1
	rm -rf "$TMP/art"
	mkdir -m 700 "$TMP/art"
	shift
	"$@" node "$SRC/tests/mcp/client_test.mjs" "$SDK" "$AIRLOCK" "$mode" "$TMP/art" || status=1
}

# Against a real airlock-worker (dev mode) and airlock serve with
# mechanism $1: the client test in worker mode (airlock mcp --worker
# --claim), then the worker's log must say the run's sandbox was destroyed
# when the session released its lease.
run_worker() {
	mech=$1 image=$2
	shift 2
	W=$TMP/w-$mech
	mkdir -m 700 "$W"
	printf 'svc-token-0123456789abcdef\n' > "$W/svc.token"
	chmod 600 "$W/svc.token"
	cat > "$W/airlock.yaml" <<YAML
sandbox:
  mechanism: $mech
$image
service:
  listen: unix:$W/svc.sock
  credential_file: $W/svc.token
worker:
  listen: unix:$W/w.sock
  state_dir: $W
  auth_mode: dev
  service_address: unix:$W/svc.sock
  service_credential_file: $W/svc.token
YAML
	# The suite's own variables stay out of the programs' environments:
	# the service refuses to start beside a credential-shaped name
	# (scripts/test.sh exports AIRLOCK_TEST_IMAGE_STORE).
	env -u AIRLOCK_TEST_IMAGE_STORE "$AIRLOCK" serve --config "$W/airlock.yaml" 2>>"$W/log" &
	svc=$!
	env -u AIRLOCK_TEST_IMAGE_STORE "$WORKER" --config "$W/airlock.yaml" 2>>"$W/log" &
	wrk=$!
	i=0
	while [ $i -lt 100 ] && ! { [ -S "$W/svc.sock" ] && [ -S "$W/w.sock" ]; }; do sleep 0.1; i=$((i + 1)); done
	"$@" node "$SRC/tests/mcp/client_test.mjs" "$SDK" "$AIRLOCK" "worker-$mech" "$W/artifacts" "unix:$W/w.sock" || status=1
	if grep -q '"sandbox.destroyed".*"why":"released"' "$W/log"; then
		echo "ok   mcp-sdk-worker-$mech::lease-released-sandbox-destroyed"
	else
		echo "FAIL mcp-sdk-worker-$mech::lease-released-sandbox-destroyed"; sed 's/^/    /' "$W/log"; status=1
	fi
	kill -TERM "$wrk" "$svc"
	wait "$wrk" "$svc"
}

WORKER=$(dirname "$AIRLOCK")/airlock-worker
run fake
run_worker fake ""

STORE=${AIRLOCK_TEST_IMAGE_STORE:-/var/lib/airlock/images}
digest=$(env AIRLOCK_IMAGE_STORE="$STORE" "$AIRLOCK" image ls 2>/dev/null | sed -n 's/^\(sha256:[0-9a-f]*\) .* default$/\1/p')
if ! "$AIRLOCK" doctor 2>/dev/null | grep -Eq '^native +available'; then
	echo "SKIP mcp-sdk-native: airlock doctor does not list native"
	echo "SKIP mcp-sdk-worker-native: airlock doctor does not list native"
	echo "SKIP mcp-sdk::readme-example: airlock doctor does not list native"
elif [ -z "$digest" ]; then
	echo "SKIP mcp-sdk-native: no default image in $STORE"
	echo "SKIP mcp-sdk-worker-native: no default image in $STORE"
	echo "SKIP mcp-sdk::readme-example: no default image in $STORE"
else
	AIRLOCK_IMAGE_STORE=$STORE run native
	AIRLOCK_IMAGE_STORE=$STORE run_worker native "  image: $digest"
	# The README's example, as written: the block after its marker, run
	# from the SDK's directory with this build's airlock first on PATH and
	# the settings' defaults (native, the store's default image).
	python3 - "$SRC/README.md" "$SDK/readme_example.mjs" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"<!-- mcp-readme-example -->\n```js\n(.*?)```", text, re.S)
open(sys.argv[2], "w").write(m.group(1) if m else "throw new Error('no example in the README');\n")
PY
	out=$(cd "$SDK" && PATH="$(dirname "$AIRLOCK"):$PATH" AIRLOCK_IMAGE_STORE=$STORE \
		node readme_example.mjs 2>"$TMP/readme.err")
	if [ "$out" = "2 42" ]; then
		echo "ok   mcp-sdk::readme-example"
	else
		echo "FAIL mcp-sdk::readme-example: printed '$out'"; sed 's/^/    /' "$TMP/readme.err"; status=1
	fi
fi
exit $status
