/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_HOST_FILETABLE_H
#define AIRLOCK_HOST_FILETABLE_H

/*
 * The host's file table (fs.file-max), which every tenant and every host
 * daemon share: when it is full every open, socket and pipe on the host
 * fails with ENFILE (only root's continue, within a small reserve), and a
 * provision fails in whichever step opens a file first, with words that
 * name that step (or, for gvisor, only "runsc run exited with status
 * 128"). A provision asks here first, and explains its failure here, so
 * the caller is told it is the host's table, and which setting.
 */

#include "airlock/error.h"

/* 0 when the table has AIRLOCK_HOST_FILES_FREE_MIN free entries or more
 * (or cannot be read: the provision then finds out itself); else
 * ExecutionUnavailable naming fs.file-max and the counts. Fault point
 * "provision.host_files" (util/fault.h) stands for a full table. */
int host_files_check(airlock_error *err);

/* After a provision failed with r (< 0) and err: when the failure was ENFILE
 * or the table is now full, err becomes ExecutionUnavailable naming
 * fs.file-max, its old message kept after it; returns the code for err.
 * Otherwise returns r and leaves err. */
int host_files_explain(int r, airlock_error *err);

#endif
