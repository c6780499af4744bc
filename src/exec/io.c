/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A running command's output, input, working directory and disk watch, the
 * same for every mechanism (io.h).
 */
#include "exec/io.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "airlock/tiers.h"
#include "airlock/port/workspace.h"

void exec_streams_init(exec_stream *out, exec_stream *errs, const airlock_exec_request *req)
{
	exec_stream *s[2] = { out, errs };
	for (int i = 0; i < 2; i++) {
		*s[i] = (exec_stream){ .fd = -1, .on_output = req->on_output,
			               .output_arg = req->output_arg,
			               .which = i == 0 ? AIRLOCK_OUTPUT_STDOUT : AIRLOCK_OUTPUT_STDERR };
		util_buf_init(&s[i]->buf, (size_t)req->command->maximum_output_bytes);
	}
}

/* Hand the observer buf[sent, upto). */
static void stream_deliver_to(exec_stream *s, size_t upto)
{
	if (!s->on_output || upto <= s->sent)
		return;
	s->on_output(s->output_arg, s->which, s->buf.data + s->sent, upto - s->sent);
	s->sent = upto;
}

/* What can go out now: everything, or everything before a last line that
 * may still be cut. Only the bytes not yet sent are searched for the line
 * start, and a held line is released once it cannot match, so the work per
 * byte stays constant. */
static void stream_deliver(exec_stream *s)
{
	if (!s->on_output)
		return;
	size_t upto = s->buf.len;
	if (s->hold_prefix && upto > s->sent) {
		const unsigned char *base = s->buf.data + s->sent;
		size_t n = upto - s->sent;
		/* The last line ends at the last byte, or before a final '\n'. */
		size_t end = base[n - 1] == '\n' ? n - 1 : n;
		const unsigned char *nl = end ? memrchr(base, '\n', end) : NULL;
		size_t start = nl ? (size_t)(nl - base) + 1 : 0;
		size_t plen = strlen(s->hold_prefix), have = end - start;
		size_t cmp = have < plen ? have : plen;
		if (memcmp(base + start, s->hold_prefix, cmp) == 0)
			upto = s->sent + start;
	}
	stream_deliver_to(s, upto);
}

void exec_stream_finish(exec_stream *s)
{
	stream_deliver_to(s, s->buf.len);
}

bool exec_stream_read(exec_stream *s)
{
	unsigned char chunk[65536];
	for (;;) {
		ssize_t r = read(s->fd, chunk, sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
				close(s->fd);
				s->fd = -1;
			}
			return false;
		}
		if (util_buf_append(&s->buf, chunk, (size_t)r) != 0) {
			/* The cap: stop reading; the caller kills the command. */
			s->truncated = true;
			close(s->fd);
			s->fd = -1;
			stream_deliver(s);
			return true;
		}
		stream_deliver(s);
	}
}

/* The signal is blocked on this thread for the write, and
 * one the write raised is taken off the thread's pending set before the
 * mask is restored; EPIPE is what the caller sees. */
ssize_t exec_write_nosigpipe(int fd, const void *p, size_t n)
{
	sigset_t pipe_set, old, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	ssize_t w = write(fd, p, n);
	int e = errno;
	if (w < 0 && e == EPIPE && !was_pending) {
		const struct timespec zero = { 0, 0 };
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return w;
}

int exec_make_cwd(const char *rel, char *out, size_t size)
{
	if (strcmp(rel, ".") == 0)
		return snprintf(out, size, "%s", AIRLOCK_WORKSPACE_ROOT) < (int)size ? 0 : -ENAMETOOLONG;
	return snprintf(out, size, "%s/%s", AIRLOCK_WORKSPACE_ROOT, rel) < (int)size ? 0 : -ENAMETOOLONG;
}


int exec_disk_sample(const host_volume *v, exec_disk_watch *d, bool first, int64_t now, bool *ret_full,
                     airlock_error *err)
{
	bool full = false;
	int r = host_volume_full(v, &full, err);
	struct statfs s;
	if (r == 0 && fstatfs(host_volume_root_fd(v), &s) < 0)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, errno, "workspace volume: fstatfs");
	if (r < 0)
		return r;
	if (first) {
		d->bfree0 = s.f_bfree;
		d->ffree0 = s.f_ffree;
	}
	d->moved = d->moved || !full || s.f_bfree != d->bfree0 || s.f_ffree != d->ffree0;
	if (!full)
		d->full_since = 0;
	else if (!d->full_since)
		d->full_since = now;
	*ret_full = full;
	return 0;
}

int exec_env_build(const airlock_env *env, bool proxied, char ***ret, size_t *ret_n,
                   airlock_error *err)
{
	/* +2: PWD (set per command) and the NULL; + the proxy variables. */
	char **envp = calloc(env->n + 2 + AIRLOCK_SANDBOX_PROXY_VARS_N, sizeof(char *));
	*ret = envp;
	*ret_n = 0;
	if (!envp)
		return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "environment");
	for (size_t i = 0; proxied && i < AIRLOCK_SANDBOX_PROXY_VARS_N; i++) {
		if (asprintf(&envp[*ret_n], "%s=%s", airlock_sandbox_proxy_vars[i],
		             AIRLOCK_SANDBOX_PROXY_URL) < 0) {
			envp[*ret_n] = NULL;
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "environment");
		}
		(*ret_n)++;
	}
	for (size_t i = 0; i < env->n; i++) {
		if (strcmp(env->vars[i].name, "PWD") == 0 ||
		    (proxied && airlock_sandbox_proxy_var(env->vars[i].name)))
			continue;
		if (asprintf(&envp[*ret_n], "%s=%s", env->vars[i].name, env->vars[i].value) < 0) {
			envp[*ret_n] = NULL;
			return airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "environment");
		}
		(*ret_n)++;
	}
	return 0;
}

int exec_egress_decide(const airlock_egress_policy *policy, const airlock_proxy *proxy,
                       const airlock_environment_spec *spec, bool *ret_proxied,
                       airlock_error *err)
{
	static const airlock_egress_policy deny = { .mode = AIRLOCK_EGRESS_DENY };
	int r = airlock_egress_policy_covers(policy ? policy : &deny, &spec->egress, err);
	if (r < 0)
		return r;
	if (!proxy)
		return airlock_error_set(err, AIRLOCK_ERR_EXECUTION_UNAVAILABLE, 0,
		                         "egress: no egress proxy is running for this service");
	*ret_proxied = spec->egress.n_destinations > 0;
	return 0;
}

void exec_stdin_feed(int *fd, const airlock_execution_command *cmd, size_t *off)
{
	ssize_t w = exec_write_nosigpipe(*fd, cmd->stdin_data + *off, cmd->stdin_len - *off);
	if (w > 0)
		*off += (size_t)w;
	if ((w < 0 && errno != EAGAIN && errno != EINTR) || *off == cmd->stdin_len) {
		close(*fd);
		*fd = -1;
	}
}

int exec_result_common(airlock_execution_result *ret, exec_stream *out, exec_stream *errs,
                       const airlock_snapshot *before, const airlock_snapshot *after,
                       int64_t files_changed_max, const airlock_resource_limits *limits,
                       int rootfd, int64_t duration_ms, airlock_error *err)
{
	exec_stream_finish(out);
	exec_stream_finish(errs);
	ret->timed_out = ret->killed_by == AIRLOCK_KILL_TIMEOUT;
	ret->stdout_truncated = out->truncated;
	ret->stderr_truncated = errs->truncated;
	/* At most the volume's size is hashed: the real data it can hold.
	 * RLIMIT_FSIZE already keeps any one file under it. And for at most
	 * AIRLOCK_SNAPSHOT_HASH_MS: holes are free to make and cost their
	 * apparent size to hash, so the byte budget alone is seconds. Within
	 * that, the hashing thread's CPU time is bounded by the command's own
	 * CPU share over the same time (cpu_millicores / 1000 of it): the
	 * service spends on a command's files no more CPU than the command
	 * could have spent itself in that time, so a command that makes holes
	 * cannot buy the service's CPU outside its quota. */
	int64_t cpu_ns = (int64_t)AIRLOCK_SNAPSHOT_HASH_MS * 1000000 / 1000 * limits->cpu_millicores;
	snapshot_hash_root hr = {
		.fd = rootfd,
		.cpu_deadline_ns = snapshot_thread_cpu_ns() + (cpu_ns > 0 ? cpu_ns : 1),
	};
	int r = snapshot_diff(before, after, (size_t)files_changed_max,
	                      (uint64_t)limits->workspace_bytes,
	                      util_monotonic_ms() + AIRLOCK_SNAPSHOT_HASH_MS, snapshot_hash_fd, &hr,
	                      ret, err);
	if (r < 0)
		return r;
	ret->stdout_data = util_buf_steal(&out->buf, &ret->stdout_len);
	ret->stderr_data = util_buf_steal(&errs->buf, &ret->stderr_len);
	if (!ret->stdout_data || !ret->stderr_data)
		r = airlock_error_set(err, AIRLOCK_ERR_SYSTEM, ENOMEM, "the output");
	ret->duration_ms = duration_ms;
	return r;
}
