#!/usr/bin/env bash
# Build the libFuzzer targets with clang and run each for SECONDS (default 60).
# New inputs that increase coverage land in a scratch directory; copy the
# interesting ones (and every fixed crasher) into fuzz/corpus/TARGET/, where
# they run as regression tests in every build.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
if [ ! -f build-fuzz/build.ninja ]; then
	CC=clang meson setup build-fuzz -Dfuzz=true -Dbuildtype=debugoptimized
fi
ninja -C build-fuzz
for t in fuzz_json fuzz_resolve fuzz_settings; do
	scratch=$(mktemp -d)
	echo "fuzz: $t for ${seconds}s"
	./build-fuzz/fuzz/$t -max_total_time="$seconds" -max_len=8192 "$scratch" "fuzz/corpus/$t"
	rm -rf "$scratch"
done
