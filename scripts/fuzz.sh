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
# Every target with a kept corpus (fuzz/meson.build lists the same names).
for dir in fuzz/corpus/*/; do
	t=$(basename "$dir")
	scratch=$(mktemp -d)
	echo "fuzz: $t for ${seconds}s"
	# Past the CONNECT parser's 8 KiB cap, so the cap itself is exercised.
	./build-fuzz/fuzz/$t -max_total_time="$seconds" -max_len=9000 "$scratch" "fuzz/corpus/$t"
	rm -rf "$scratch"
done
