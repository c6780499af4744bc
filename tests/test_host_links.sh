#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# What a mechanism links is not the image builder: the host facilities'
# library (src/host/, libairlock_host) must reference no symbol that the
# builder's library (src/image/, libairlock_image_build) defines. A store
# function that called into the build code would pull debootstrap's runner,
# the apt parser and the tree cleaner into every mechanism.
#
# usage: test_host_links.sh NM HOST_LIB BUILDER_LIB
set -eu
nm=$1 host=$2 builder=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# nm on an archive prints "member:" headers and "  U name" / "addr T name".
"$nm" -u "$host" | awk '$1 == "U" { print $2 }' | sort -u >"$tmp/host_undefined"
"$nm" -u "$builder" | awk '$1 == "U" { print $2 }' | sort -u >"$tmp/builder_undefined"
"$nm" --defined-only "$builder" | awk 'NF == 3 && $2 ~ /^[TDBRC]$/ { print $3 }' | sort -u \
	>"$tmp/builder_defined"
"$nm" --defined-only "$host" | awk 'NF == 3 && $2 ~ /^[TDBRC]$/ { print $3 }' | sort -u \
	>"$tmp/host_defined"

# The check must not pass by reading nothing: the builder defines the build
# and references the store (it publishes into it), and the host defines the
# store.
for want in airlock_image_build:builder_defined host_image_publish:builder_undefined \
	airlock_image_open_verified:host_defined; do
	if ! grep -qx "${want%%:*}" "$tmp/${want#*:}"; then
		echo "test_host_links: ${want%%:*} is not in $(echo "${want#*:}" | tr _ ' ') (nm output not understood?)" >&2
		exit 1
	fi
done

comm -12 "$tmp/host_undefined" "$tmp/builder_defined" >"$tmp/crossing"
if [ -s "$tmp/crossing" ]; then
	echo "test_host_links: src/host/ references what the image builder (src/image/) defines:" >&2
	sed 's/^/  /' "$tmp/crossing" >&2
	echo "move it to src/host/ or keep the builder's code out of the host facilities" >&2
	exit 1
fi
echo "src/host/ references none of the $(wc -l <"$tmp/builder_defined") symbols src/image/ defines"
