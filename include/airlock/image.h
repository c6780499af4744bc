/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_IMAGE_H
#define AIRLOCK_IMAGE_H

/*
 * Sandbox images: the store (airlock/image_store.h: open, verify, list,
 * import), which every mechanism uses, and the builder
 * (airlock/image_build.h: debootstrap, apt sources), which only
 * `airlock image build` and the first-run setup use. This header is both.
 */

#include "airlock/image_build.h"
#include "airlock/image_store.h"

#endif
