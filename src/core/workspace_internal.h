/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_CORE_WORKSPACE_INTERNAL_H
#define AIRLOCK_CORE_WORKSPACE_INTERNAL_H

/*
 * The bracket every call into a workspace adapter runs in (core/workspace.c),
 * for code inside the library that uses an adapter's state directly (the
 * fake mechanism's memory workspace, workspace/memory/memws.h): while it is
 * held, the owner's end (airlock_workspace_free) waits, so the adapter's
 * ctx is never freed under it.
 */

#include "airlock/error.h"
#include "airlock/port/workspace.h"

/* 0, or ExecutionRejected once the workspace's owner has ended it. */
int workspace_call_enter(airlock_workspace *w, airlock_error *err);
void workspace_call_leave(airlock_workspace *w);

#endif
