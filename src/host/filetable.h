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
 *
 * What a sandbox can hold in the table is bounded by its memory limit, not
 * by its descriptors: a file mapped and then closed keeps its entry with
 * no descriptor, each costing the sandbox's memory cgroup at least
 * AIRLOCK_HOST_FILE_CHARGE (airlock/caps.h). So a sandbox is admitted only
 * when the table has room for memory_bytes / AIRLOCK_HOST_FILE_CHARGE
 * entries besides AIRLOCK_HOST_FILES_FREE_MIN; with fs.file-max at
 * LONG_MAX (scripts/setup.sh) that is always true and the entries are
 * bounded by memory alone.
 */

#include <stddef.h>
#include <stdint.h>

#include "airlock/error.h"

/* The free entries a sandbox with this memory limit needs to be admitted:
 * memory_bytes / AIRLOCK_HOST_FILE_CHARGE + AIRLOCK_HOST_FILES_FREE_MIN. */
int64_t host_files_needed(int64_t memory_bytes);

/* 0 when the table's free entries (fs.file-max minus fs.file-nr's
 * allocated) are host_files_needed(memory_bytes) or more (or the table
 * cannot be read: the provision then finds out itself); else
 * ExecutionUnavailable naming fs.file-max, its value and the value needed.
 * Fault point "provision.host_files" (util/fault.h) stands for a full
 * table. */
int host_files_check(int64_t memory_bytes, airlock_error *err);

/* After a provision failed with r (< 0) and err: when the failure was ENFILE
 * or the table is now full, err becomes ExecutionUnavailable naming
 * fs.file-max, its old message kept after it; returns the code for err.
 * Otherwise returns r and leaves err. */
int host_files_explain(int r, airlock_error *err);

/* Whether fs.file-max alone (the table empty) can hold one sandbox with
 * this memory limit: 1 when it can, 0 when it cannot (msg, when not NULL,
 * says so, naming fs.file-max, its value, the value needed and the setting
 * that raises it), -errno when the table cannot be read. For a service's
 * start. */
int host_files_capacity(int64_t memory_bytes, char *msg, size_t size);

/* For tests: read the table from path (the format of /proc/sys/fs/file-nr)
 * instead of /proc/sys/fs/file-nr; NULL reads /proc again. The path is
 * kept, not copied. Not thread-safe against a running check: set it
 * before provisions start. */
void host_files_source(const char *path);

#endif
