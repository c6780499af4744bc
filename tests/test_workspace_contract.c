/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The WorkspaceHandle contract suite (the specification, "Provenance, and
 * why the handle answers it": "Both adapters ... run one contract suite over
 * resolve and provenance together").
 *
 * Every CONTRACT() test is written once and instantiated per adapter, as
 * contract_local::<name>, contract_memory::<name> and contract_volume::<name>
 * (the native mechanism's ext4 workspace volume; needs root, skips without).
 * A fixture gives each adapter the one thing the port cannot do for itself:
 * put a file there the way something other than the tool would (a sandbox
 * for memory, a direct write into the directory for local and for the
 * volume), and say which provenance such a file must report.
 *
 * Adapter-specific extras follow, in sections of their own: the local
 * directory's symlink and magic-link cases, and the memory workspace's
 * fake-mechanism API.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "airlock/fake.h"
#include "airlock/port/exec.h"
#include "airlock/port/workspace.h"
#include "airlock/remote.h"
#include "airlock/run_command.h"
#include "airlock/service.h"
#include "host/volume.h"
#include "testlib.h"
#include "util/util.h"
#include "workspace/memory/memws.h"

/* Host paths in the tests are built from mkdtemp names; generous room. */
#define PBUF (3 * PATH_MAX)
#define ESCAPE airlock_errcode(AIRLOCK_ERR_WORKSPACE_ESCAPE)
#define TOOLVAL airlock_errcode(AIRLOCK_ERR_TOOL_VALIDATION)

/* ---- fixtures ------------------------------------------------------------ */

typedef struct fx {
	const char *adapter;
	airlock_workspace *ws;
	airlock_provenance foreign; /* what a file the tool did not write reports */
	/* local */
	char dir[PATH_MAX];
	char outside[PATH_MAX];
	int dfd; /* the test's own descriptor on dir, for foreign writes */
	/* memory */
	airlock_memws *mem;
	/* volume: on a detached tmpfs, so nothing has a path */
	int backing;
	host_volume *vol;
	/* remote: the workspace of a sandbox of the fake mechanism, served by
	 * an in-process service on a Unix socket; served_mem is that sandbox's
	 * memory workspace on the far side, where foreign writes go. */
	bool remote;
	airlock_memws *served_mem;
	airlock_workspace *served_ws;
	airlock_exec *served, *client;
	airlock_service *svc;
	airlock_environment_spec spec;
	airlock_environment_handle handle;
	char sock[128]; /* a sun_path holds 108 bytes */
} fx;

static fx g_fx;

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p) < 0 ? -1 : 0;
}

static void rm_tree(const char *p)
{
	if (p[0])
		nftw(p, rm_cb, 32, FTW_DEPTH | FTW_PHYS);
}

static void local_init(void)
{
	fx *f = &g_fx;
	memset(f, 0, sizeof(*f));
	f->adapter = "local";
	f->dfd = -1;
	f->backing = -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/airlock-contract-XXXXXX");
	snprintf(f->outside, sizeof(f->outside), "/tmp/airlock-contract-out-XXXXXX");
	cr_assert(mkdtemp(f->dir));
	cr_assert(mkdtemp(f->outside));
	f->dfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(f->dfd >= 0);
	int wfd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert(wfd >= 0);
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_local_new(wfd, AIRLOCK_PROVENANCE_UNKNOWN, &f->ws, &e), 0,
	             "%s", e.message);
	f->foreign = AIRLOCK_PROVENANCE_UNKNOWN;
}

static void memory_init(void)
{
	fx *f = &g_fx;
	memset(f, 0, sizeof(*f));
	f->adapter = "memory";
	f->dfd = -1;
	f->backing = -1;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_memory_new(&f->ws, &e), 0, "%s", e.message);
	f->mem = airlock_workspace_memory_state(f->ws);
	cr_assert(f->mem);
	f->foreign = AIRLOCK_PROVENANCE_SANDBOX_WRITTEN;
}

/* The native workspace volume; dfd is a plain directory descriptor on its
 * root, the way a process in the sandbox writes it. */
static void volume_init(void)
{
	fx *f = &g_fx;
	memset(f, 0, sizeof(*f));
	f->adapter = "volume";
	f->dfd = -1;
	f->backing = -1;
	if (geteuid() != 0 || access("/dev/loop-control", R_OK | W_OK) != 0)
		cr_skip_test("the volume adapter needs root and /dev/loop-control");
	int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
	cr_assert(fs >= 0);
	cr_assert_eq(fsconfig(fs, FSCONFIG_SET_STRING, "size", "128m", 0), 0);
	cr_assert_eq(fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0), 0);
	f->backing = fsmount(fs, FSMOUNT_CLOEXEC, 0);
	close(fs);
	cr_assert(f->backing >= 0);
	airlock_error e = { 0 };
	cr_assert_eq(host_volume_create(f->backing, 32 << 20, 1000, getuid(), getgid(), &f->vol,
	                                &e),
	             0, "%s", e.message);
	cr_assert_eq(host_volume_workspace(f->vol, &f->ws, &e), 0, "%s", e.message);
	f->dfd = openat(host_volume_root_fd(f->vol), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(f->dfd >= 0);
	f->foreign = AIRLOCK_PROVENANCE_SANDBOX_WRITTEN;
}

#define REMOTE_CREDENTIAL "workspace-contract-credential-5e1c0a97b3d2"

static void remote_init(void)
{
	fx *f = &g_fx;
	memset(f, 0, sizeof(*f));
	f->adapter = "remote";
	f->remote = true;
	f->dfd = -1;
	f->backing = -1;
	airlock_error e = { 0 };
	airlock_fake *fake = NULL;
	cr_assert_eq(airlock_fake_new(&fake, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_exec_new(airlock_fake_ops(), fake, NULL, &f->served, &e), 0, "%s",
	             e.message);
	snprintf(f->dir, sizeof(f->dir), "/tmp/airlock-contract-remote-XXXXXX");
	cr_assert(mkdtemp(f->dir));
	char listen[sizeof(f->sock) + 8];
	snprintf(f->sock, sizeof(f->sock), "%.64s/api.sock", f->dir);
	snprintf(listen, sizeof(listen), "unix:%s", f->sock);
	airlock_service_config sc;
	airlock_service_config_default(&sc);
	sc.listen = listen;
	sc.credential = REMOTE_CREDENTIAL;
	sc.credential_len = strlen(REMOTE_CREDENTIAL);
	cr_assert_eq(airlock_service_new(&sc, f->served, &f->svc, &e), 0, "%s", e.message);
	airlock_remote_config rc = { .address = listen, .credential = REMOTE_CREDENTIAL,
		                     .credential_len = strlen(REMOTE_CREDENTIAL) };
	airlock_remote *rm = NULL;
	cr_assert_eq(airlock_remote_new(&rc, &rm, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_exec_new(airlock_remote_ops(), rm, NULL, &f->client, &e), 0, "%s",
	             e.message);
	test_spec(&f->spec, "tenant-ws", "run-ws");
	cr_assert_eq(airlock_exec_provision(f->client, &f->spec, &f->handle, &e), 0, "%s",
	             e.message);
	airlock_exec_call call = { .tenant_id = "tenant-ws",
		                   .remaining_budget_ms = AIRLOCK_BUDGET_NONE };
	cr_assert_eq(airlock_exec_workspace(f->client, &call, &f->handle, &f->ws, &e), 0, "%s",
	             e.message);
	/* The served sandbox's own handle (its clock's timestamps), from the
	 * service's list, for its memory workspace. */
	airlock_exec_entry *v = NULL;
	size_t n = 0;
	cr_assert_eq(airlock_exec_list(f->served, &v, &n, &e), 0, "%s", e.message);
	cr_assert_eq(n, 1);
	airlock_environment_handle sh = { .tenant_id = v[0].tenant_id, .run_id = v[0].run_id,
		                          .lease_epoch = v[0].lease_epoch,
		                          .created_at_ms = v[0].created_at_ms,
		                          .expires_at_ms = v[0].expires_at_ms };
	memcpy(sh.environment_id, v[0].environment_id, sizeof(sh.environment_id));
	cr_assert_eq(airlock_exec_workspace(f->served, &call, &sh, &f->served_ws, &e), 0, "%s",
	             e.message);
	airlock_exec_list_free(v, n);
	f->served_mem = airlock_workspace_memory_state(f->served_ws);
	cr_assert(f->served_mem);
	f->foreign = AIRLOCK_PROVENANCE_SANDBOX_WRITTEN;
}

static void remote_fini(fx *f)
{
	airlock_workspace_release(f->ws);
	f->ws = NULL;
	airlock_workspace_release(f->served_ws);
	airlock_error e = { 0 };
	cr_assert_eq(airlock_exec_destroy(f->client, &f->handle, &e), 0, "%s", e.message);
	cr_assert_eq(airlock_exec_live(f->served), 0, "the destroy did not reach the service");
	airlock_exec_free(f->client);
	airlock_service_free(f->svc);
	airlock_exec_free(f->served);
	airlock_environment_handle_clear(&f->handle);
	airlock_environment_spec_clear(&f->spec);
	unlink(f->sock);
	rmdir(f->dir);
	f->dir[0] = 0;
	f->remote = false;
}

static void fx_fini(void)
{
	fx *f = &g_fx;
	/* The remote workspace is a reference the client's core gave; its
	 * owner is the remote adapter, which ends it at the destroy. */
	if (f->remote)
		remote_fini(f);
	airlock_workspace_free(f->ws);
	f->ws = NULL;
	if (f->dfd >= 0)
		close(f->dfd);
	f->dfd = -1;
	/* After every descriptor on the volume is gone, as the contract asks. */
	host_volume_destroy(f->vol);
	f->vol = NULL;
	if (f->backing >= 0)
		close(f->backing);
	f->backing = -1;
	rm_tree(f->dir);
	rm_tree(f->outside);
}

/* Put a file the tool did not write, creating its directories as a sandbox
 * would. Local: written in place (same inode when it exists). */
static void foreign_write(fx *f, const char *rel, const void *data, size_t len)
{
	if (f->mem || f->served_mem) {
		cr_assert_eq(memws_sandbox_write(f->mem ? f->mem : f->served_mem, rel, data, len), 0,
		             "%s", rel);
		return;
	}
	char part[PATH_MAX];
	for (const char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/')) {
		snprintf(part, sizeof(part), "%.*s", (int)(s - rel), rel);
		cr_assert(mkdirat(f->dfd, part, 0755) == 0 || errno == EEXIST, "mkdir %s", part);
	}
	int fd = openat(f->dfd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "open %s: %s", rel, strerror(errno));
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void tool_write(fx *f, const char *rel, const void *data, size_t len)
{
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_write(f->ws, rel, data, len, &e), 0, "write %s: %s", rel,
	             e.message);
}

static airlock_provenance prov(fx *f, const char *rel)
{
	airlock_error e = { 0 };
	airlock_provenance p = AIRLOCK_PROVENANCE_INVALID;
	cr_assert_eq(airlock_workspace_provenance(f->ws, rel, &p, &e), 0, "provenance %s: %s", rel,
	             e.message);
	return p;
}

/* One test body, three registered tests: contract_local::name,
 * contract_memory::name and contract_volume::name. */
#define CONTRACT(name)                                                                             \
	static void name##_body(fx *f);                                                            \
	Test(contract_local, name, .init = local_init, .fini = fx_fini) { name##_body(&g_fx); }   \
	Test(contract_memory, name, .init = memory_init, .fini = fx_fini) { name##_body(&g_fx); } \
	Test(contract_volume, name, .init = volume_init, .fini = fx_fini) { name##_body(&g_fx); } \
	Test(contract_remote, name, .init = remote_init, .fini = fx_fini) { name##_body(&g_fx); } \
	static void name##_body(fx *f)

/* Resolve bytes; 0 or the code, *ret set only on success. */
static int resolve_bytes(fx *f, const char *in, size_t len, char **ret, airlock_error *e)
{
	return airlock_workspace_resolve(f->ws, in, len, ret, e);
}

static void expect_resolves(fx *f, const char *in, size_t len)
{
	char *out = NULL;
	airlock_error e = { 0 };
	int r = resolve_bytes(f, in, len, &out, &e);
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	cr_assert_eq(r, 0, "[%s] %s should resolve: %s", f->adapter,
	             airlock_workspace_quote(in, len, q), e.message);
	cr_assert_eq(strncmp(out, "/workspace/", 11), 0);
	cr_assert_eq(strlen(out), 11 + len);
	cr_assert_eq(memcmp(out + 11, in, len), 0);
	free(out);
}

static void expect_escape(fx *f, const char *in, size_t len, const char *rule)
{
	static char untouched[] = "untouched";
	char *out = untouched;
	char *sentinel = out;
	airlock_error e = { 0 };
	int r = resolve_bytes(f, in, len, &out, &e);
	char q[AIRLOCK_WORKSPACE_QUOTE_MAX];
	airlock_workspace_quote(in, len, q);
	cr_assert_eq(r, ESCAPE, "[%s] %s should be WorkspaceEscape, got %d", f->adapter, q, r);
	cr_assert_eq(e.cls, AIRLOCK_ERR_WORKSPACE_ESCAPE);
	cr_assert_eq(out, sentinel, "output touched on failure");
	if (rule)
		cr_assert(strstr(e.message, rule), "[%s] message for %s lacks '%s': %s", f->adapter,
		          q, rule, e.message);
}

#define S(lit) (lit), (sizeof(lit) - 1)

/* ---- the contract -------------------------------------------------------- */

CONTRACT(root_is_workspace)
{
	cr_assert_str_eq(airlock_workspace_root(f->ws), "/workspace");
}

CONTRACT(resolve_accepts_nested_paths)
{
	expect_resolves(f, S("a"));
	expect_resolves(f, S("a/b/c.txt"));
	expect_resolves(f, S("dir/sub/deeper/file"));
	expect_resolves(f, S(".hidden"));
	expect_resolves(f, S("..."));
	expect_resolves(f, S("x y"));
	/* Not separators and not dots to the kernel, so not to us either. */
	expect_resolves(f, S("a\\..\\b"));
	expect_resolves(f, S("%2e%2e/%2f"));
	expect_resolves(f, S("\xc0\xae\xc0\xae/\xc0\xaf"));
	/* Existing parents resolve too. */
	foreign_write(f, "sub/file", "x", 1);
	expect_resolves(f, S("sub"));
	expect_resolves(f, S("sub/file"));
	expect_resolves(f, S("sub/new/newer"));
}

CONTRACT(resolve_rejects_string_rule_violations)
{
	expect_escape(f, S(""), "rule 1");
	expect_escape(f, S("/abs"), "rule 2");
	expect_escape(f, S("/"), "rule 2");
	expect_escape(f, S("a/../b"), "'..'");
	expect_escape(f, S(".."), "'..'");
	expect_escape(f, S("a/.."), "'..'");
	expect_escape(f, S("./a"), "'.'");
	expect_escape(f, S("."), "'.'");
	expect_escape(f, S("a/./b"), "'.'");
	expect_escape(f, S("a//b"), "empty component");
	expect_escape(f, S("a/"), "trailing");
	expect_escape(f, S("a\0b"), "NUL");
	expect_escape(f, S("\0"), "NUL");
	expect_escape(f, S("ok\0/../../etc"), "NUL");
}

CONTRACT(resolve_component_length_limit)
{
	char name[300];
	memset(name, 'n', sizeof(name));
	expect_resolves(f, name, 255);
	expect_escape(f, name, 256, "rule 4");
	char nested[600];
	memcpy(nested, "d/", 2);
	memset(nested + 2, 'n', 256);
	expect_resolves(f, nested, 2 + 255);
	expect_escape(f, nested, 2 + 256, "component longer than 255");
}

CONTRACT(resolve_total_length_limit)
{
	/* "/workspace/" is 11 bytes: 4085 input bytes make a 4096-byte result. */
	static char buf[5000];
	size_t len = 0;
	while (len < sizeof(buf)) {
		size_t take = sizeof(buf) - len < 200 ? sizeof(buf) - len : 200;
		memset(buf + len, 'p', take);
		len += take;
		if (len < sizeof(buf))
			buf[len++] = '/';
	}
	/* Make sure neither cut point lands on a separator. */
	buf[4084] = 'p';
	buf[4085] = 'p';
	expect_resolves(f, buf, 4085);
	expect_escape(f, buf, 4086, "longer than 4096");
	expect_escape(f, buf, sizeof(buf), "rule 4");
}

CONTRACT(rejection_message_quotes_safely)
{
	airlock_error e = { 0 };
	char *out = NULL;
	cr_assert_eq(resolve_bytes(f, S("../\x1b[31mred\n\0tail"), &out, &e), ESCAPE);
	cr_assert_null(strchr(e.message, '\x1b'), "raw escape byte in: %s", e.message);
	cr_assert_null(strchr(e.message, '\n'));
	cr_assert(strstr(e.message, "\\x1b"), "%s", e.message);

	static char big[3000];
	memset(big, 'A', sizeof(big));
	big[0] = '/';
	cr_assert_eq(resolve_bytes(f, big, sizeof(big), &out, &e), ESCAPE);
	cr_assert(strlen(e.message) < 200, "not truncated: %zu", strlen(e.message));
	cr_assert(strstr(e.message, "(3000 bytes)"), "%s", e.message);
}

CONTRACT(check_string_copies_and_never_normalizes)
{
	char *rel = NULL;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_check_string(S("a/b\\c"), &rel, &e), 0);
	cr_assert_str_eq(rel, "a/b\\c");
	free(rel);
	rel = NULL;
	cr_assert_eq(airlock_workspace_check_string(S("a/./b"), &rel, &e), ESCAPE);
	cr_assert_null(rel);
	cr_assert_eq(airlock_workspace_check_string(S("ok"), NULL, &e), 0);
	cr_assert_eq(airlock_workspace_check_string(NULL, 0, NULL, NULL), ESCAPE);
}

CONTRACT(provenance_tool_written)
{
	tool_write(f, "t.txt", "hello", 5);
	cr_assert_eq(prov(f, "t.txt"), AIRLOCK_PROVENANCE_TOOL_WRITTEN);
}

CONTRACT(provenance_foreign_file)
{
	foreign_write(f, "f.txt", "hello", 5);
	cr_assert_eq(prov(f, "f.txt"), f->foreign);
	cr_assert_neq(prov(f, "f.txt"), AIRLOCK_PROVENANCE_TOOL_WRITTEN);
}

CONTRACT(provenance_never_seen_is_unknown)
{
	cr_assert_eq(prov(f, "nothing-here"), AIRLOCK_PROVENANCE_UNKNOWN);
	cr_assert_eq(prov(f, "no/such/dir"), AIRLOCK_PROVENANCE_UNKNOWN);
}

CONTRACT(provenance_replaced_by_foreign_is_not_tool_written)
{
	tool_write(f, "t.txt", "hello", 5);
	cr_assert_eq(prov(f, "t.txt"), AIRLOCK_PROVENANCE_TOOL_WRITTEN);
	foreign_write(f, "t.txt", "HELLO", 5); /* same size, different bytes */
	cr_assert_eq(prov(f, "t.txt"), f->foreign);

	tool_write(f, "u.txt", "same", 4);
	foreign_write(f, "u.txt", "same", 4); /* same bytes: still not the tool's write */
	cr_assert_eq(prov(f, "u.txt"), f->foreign);

	/* The tool writing again makes it its own again. */
	tool_write(f, "t.txt", "again", 5);
	cr_assert_eq(prov(f, "t.txt"), AIRLOCK_PROVENANCE_TOOL_WRITTEN);
}

CONTRACT(provenance_wrapper_rejects_escapes)
{
	airlock_provenance p = AIRLOCK_PROVENANCE_INVALID;
	cr_assert_eq(airlock_workspace_provenance(f->ws, "../x", &p, NULL), ESCAPE);
	cr_assert_eq(airlock_workspace_provenance(f->ws, "/etc/passwd", &p, NULL), ESCAPE);
	cr_assert_eq(p, AIRLOCK_PROVENANCE_INVALID);
}

CONTRACT(read_returns_the_bytes_written)
{
	tool_write(f, "t.txt", "hello", 5);
	unsigned char *data = NULL;
	size_t len = 0;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_read(f->ws, "t.txt", 1024, &data, &len, &e), 0, "%s",
	             e.message);
	cr_assert_eq(len, 5);
	cr_assert_eq(memcmp(data, "hello", 5), 0);
	free(data);
}

CONTRACT(binary_data_with_nuls_round_trips)
{
	unsigned char bin[1024 + 7];
	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = (unsigned char)(i * 7 + (i >> 8));
	bin[0] = bin[100] = bin[sizeof(bin) - 1] = 0;
	tool_write(f, "bin", bin, sizeof(bin));
	unsigned char *data = NULL;
	size_t len = 0;
	cr_assert_eq(airlock_workspace_read(f->ws, "bin", sizeof(bin), &data, &len, NULL), 0);
	cr_assert_eq(len, sizeof(bin));
	cr_assert_eq(memcmp(data, bin, sizeof(bin)), 0);
	free(data);
}

CONTRACT(empty_file_round_trips)
{
	tool_write(f, "empty", NULL, 0);
	unsigned char *data = NULL;
	size_t len = 99;
	cr_assert_eq(airlock_workspace_read(f->ws, "empty", 0, &data, &len, NULL), 0);
	cr_assert_eq(len, 0);
	cr_assert_not_null(data);
	free(data);
	cr_assert_eq(prov(f, "empty"), AIRLOCK_PROVENANCE_TOOL_WRITTEN);
}

CONTRACT(read_over_max_bytes_is_refused)
{
	char buf[100];
	memset(buf, 'z', sizeof(buf));
	tool_write(f, "big", buf, sizeof(buf));
	static unsigned char untouched[] = "untouched";
	unsigned char *data = untouched;
	unsigned char *sentinel = data;
	size_t len = 7;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_read(f->ws, "big", 99, &data, &len, &e), TOOLVAL);
	cr_assert_eq(data, sentinel);
	cr_assert_eq(len, 7);
	cr_assert(strstr(e.message, "100 bytes"), "%s", e.message);
	cr_assert_eq(airlock_workspace_read(f->ws, "big", 100, &data, &len, &e), 0);
	cr_assert_eq(len, 100);
	free(data);
}

CONTRACT(read_errors)
{
	unsigned char *data = NULL;
	size_t len = 0;
	foreign_write(f, "dir/x", "1", 1);
	cr_assert_eq(airlock_workspace_read(f->ws, "missing", 10, &data, &len, NULL), -ENOENT);
	cr_assert_eq(airlock_workspace_read(f->ws, "dir", 10, &data, &len, NULL), -EISDIR);
	cr_assert_eq(airlock_workspace_read(f->ws, "dir/x/y", 10, &data, &len, NULL), -ENOTDIR);
	cr_assert_eq(airlock_workspace_read(f->ws, "../x", 10, &data, &len, NULL), ESCAPE);
	cr_assert_eq(airlock_workspace_read(f->ws, "dir//x", 10, &data, &len, NULL), ESCAPE);
	cr_assert_null(data);
}

CONTRACT(write_errors_and_parents_are_not_created)
{
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_write(f->ws, "nodir/x", "1", 1, &e), -ENOENT, "%s",
	             e.message);
	foreign_write(f, "dir/x", "1", 1);
	cr_assert_eq(airlock_workspace_write(f->ws, "dir", "1", 1, &e), -EISDIR, "%s", e.message);
	cr_assert_eq(airlock_workspace_write(f->ws, "dir/x/y", "1", 1, &e), -ENOTDIR, "%s",
	             e.message);
	cr_assert_eq(airlock_workspace_write(f->ws, "../x", "1", 1, &e), ESCAPE);
	cr_assert_eq(airlock_workspace_write(f->ws, "/x", "1", 1, &e), ESCAPE);
	cr_assert_eq(airlock_workspace_write(f->ws, "x/", "1", 1, &e), ESCAPE);
	/* Nothing appeared at the root from any of these. */
	airlock_dir_listing l = { 0 };
	cr_assert_eq(airlock_workspace_listdir(f->ws, ".", 100, &l, NULL), 0);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.entries[0].path, "dir");
	airlock_dir_listing_clear(&l);
	/* Into an existing directory is fine. */
	tool_write(f, "dir/y", "2", 1);
	cr_assert_eq(prov(f, "dir/y"), AIRLOCK_PROVENANCE_TOOL_WRITTEN);
}

CONTRACT(write_replaces_whole_file)
{
	tool_write(f, "t", "a long first version", 20);
	tool_write(f, "t", "short", 5);
	unsigned char *data = NULL;
	size_t len = 0;
	cr_assert_eq(airlock_workspace_read(f->ws, "t", 100, &data, &len, NULL), 0);
	cr_assert_eq(len, 5);
	cr_assert_eq(memcmp(data, "short", 5), 0);
	free(data);
	/* No temporary is left behind. */
	airlock_dir_listing l = { 0 };
	cr_assert_eq(airlock_workspace_listdir(f->ws, "", 100, &l, NULL), 0);
	cr_assert_eq(l.n, 1, "%zu entries", l.n);
	airlock_dir_listing_clear(&l);
}

CONTRACT(listdir_sorted_with_types_and_sizes)
{
	/* "c" < "c-d" < "c.txt" by name, while "c-d" < "c.txt" < "c/x" by path:
	 * the listing must follow names. */
	tool_write(f, "b.txt", "bbb", 3);
	foreign_write(f, "c.txt", "c", 1);
	foreign_write(f, "c-d", "cd", 2);
	foreign_write(f, "c/x", "xx", 2);
	foreign_write(f, "c/y/z", "zzzz", 4);
	foreign_write(f, "a/deep/er", "", 0);
	tool_write(f, "A", "", 0);

	airlock_dir_listing l = { 0 };
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_listdir(f->ws, ".", 100, &l, &e), 0, "%s", e.message);
	static const struct {
		const char *path;
		airlock_entry_type type;
		int64_t size;
	} want[] = {
		{ "A", AIRLOCK_ENTRY_FILE, 0 },      { "a", AIRLOCK_ENTRY_DIRECTORY, 0 },
		{ "b.txt", AIRLOCK_ENTRY_FILE, 3 },  { "c", AIRLOCK_ENTRY_DIRECTORY, 0 },
		{ "c-d", AIRLOCK_ENTRY_FILE, 2 },    { "c.txt", AIRLOCK_ENTRY_FILE, 1 },
	};
	cr_assert_eq(l.n, ARRAY_SIZE(want), "%zu entries", l.n);
	cr_assert_not(l.truncated);
	for (size_t i = 0; i < l.n; i++) {
		cr_assert_str_eq(l.entries[i].path, want[i].path);
		cr_assert_eq(l.entries[i].type, want[i].type, "%s: %s", want[i].path,
		             airlock_entry_type_name(l.entries[i].type));
		if (want[i].type == AIRLOCK_ENTRY_FILE)
			cr_assert_eq(l.entries[i].size_bytes, want[i].size, "%s", want[i].path);
	}
	airlock_dir_listing_clear(&l);
	cr_assert_eq(l.n, 0);
	cr_assert_null(l.entries);

	cr_assert_eq(airlock_workspace_listdir(f->ws, "c", 100, &l, &e), 0, "%s", e.message);
	cr_assert_eq(l.n, 2);
	cr_assert_str_eq(l.entries[0].path, "c/x");
	cr_assert_eq(l.entries[0].type, AIRLOCK_ENTRY_FILE);
	cr_assert_eq(l.entries[0].size_bytes, 2);
	cr_assert_str_eq(l.entries[1].path, "c/y");
	cr_assert_eq(l.entries[1].type, AIRLOCK_ENTRY_DIRECTORY);
	airlock_dir_listing_clear(&l);

	cr_assert_eq(airlock_workspace_listdir(f->ws, "c/y", 100, &l, &e), 0, "%s", e.message);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.entries[0].path, "c/y/z");
	cr_assert_eq(l.entries[0].size_bytes, 4);
	airlock_dir_listing_clear(&l);

	/* "" is the root too. */
	cr_assert_eq(airlock_workspace_listdir(f->ws, "", 100, &l, &e), 0);
	cr_assert_eq(l.n, ARRAY_SIZE(want));
	airlock_dir_listing_clear(&l);
}

CONTRACT(listdir_caps_with_truncated_flag)
{
	char name[16];
	/* Written in reverse so that the cap must pick the smallest names, not
	 * the first ones created. */
	for (int i = 9; i >= 0; i--) {
		snprintf(name, sizeof(name), "f%d", i);
		tool_write(f, name, "x", 1);
	}
	airlock_dir_listing l = { 0 };
	cr_assert_eq(airlock_workspace_listdir(f->ws, ".", 3, &l, NULL), 0);
	cr_assert_eq(l.n, 3);
	cr_assert(l.truncated);
	cr_assert_str_eq(l.entries[0].path, "f0");
	cr_assert_str_eq(l.entries[1].path, "f1");
	cr_assert_str_eq(l.entries[2].path, "f2");
	airlock_dir_listing_clear(&l);

	cr_assert_eq(airlock_workspace_listdir(f->ws, ".", 10, &l, NULL), 0);
	cr_assert_eq(l.n, 10);
	cr_assert_not(l.truncated);
	airlock_dir_listing_clear(&l);

	cr_assert_eq(airlock_workspace_listdir(f->ws, ".", 0, &l, NULL), 0);
	cr_assert_eq(l.n, 0);
	cr_assert(l.truncated);
	airlock_dir_listing_clear(&l);
}

/* Long paths for the byte bounds: a directory 15 components of 250 bytes
 * deep (3,764 bytes), and entry i in it, a 250-byte name that sorts by i
 * ("n00000xxx...", i < 100,000): 4,015 bytes each, within the 4,096 of rule 4. */
#define LONG_DEPTH 15
#define LONG_COMPONENT 250
static char long_dir[LONG_DEPTH * (LONG_COMPONENT + 1)];
static char long_rel[sizeof(long_dir) + LONG_COMPONENT + 2];

/* Fills long_dir; with dfd >= 0, also makes its directories there. */
static const char *long_dir_make(int dfd)
{
	size_t o = 0;
	for (int d = 0; d < LONG_DEPTH; d++) {
		if (d)
			long_dir[o++] = '/';
		memset(long_dir + o, 'a' + d, LONG_COMPONENT);
		o += LONG_COMPONENT;
		long_dir[o] = 0;
		if (dfd >= 0)
			cr_assert_eq(mkdirat(dfd, long_dir, 0755), 0);
	}
	return long_dir;
}

/* Entry i's path, in a buffer the next call reuses. */
static const char *long_path(int i)
{
	char name[LONG_COMPONENT + 1];
	snprintf(name, sizeof(name), "n%05d", i);
	memset(name + 6, 'x', LONG_COMPONENT - 6);
	name[LONG_COMPONENT] = 0;
	snprintf(long_rel, sizeof(long_rel), "%s/%s", long_dir, name);
	return long_rel;
}

/* The answer's bytes are bounded, not only its count:
 * entries under a deep directory are long, and 600 of them are more path
 * than AIRLOCK_WORKSPACE_LISTDIR_BYTES_MAX. The listing is the sorted
 * prefix that fits, marked truncated, on every adapter. */
CONTRACT(listdir_bounds_its_path_bytes)
{
	enum { FILES = 600 };
	const char *dir = long_dir_make(-1);
	/* Written in reverse, so the bound must keep the smallest names. */
	for (int i = FILES - 1; i >= 0; i--)
		foreign_write(f, long_path(i), "x", 1);
	size_t cost = strlen(long_path(0)) + 1;
	size_t fit = AIRLOCK_WORKSPACE_LISTDIR_BYTES_MAX / cost;
	cr_assert_lt(fit, FILES, "the test must pass the bound");

	airlock_dir_listing l = { 0 };
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_listdir(f->ws, dir, 100000, &l, &e), 0, "%s", e.message);
	cr_assert_eq(l.n, fit, "[%s] %zu entries, %zu fit", f->adapter, l.n, fit);
	cr_assert(l.truncated, "[%s] a listing cut by its bytes says so", f->adapter);
	size_t bytes = 0;
	for (size_t i = 0; i < l.n; i++) {
		cr_assert_str_eq(l.entries[i].path, long_path((int)i), "[%s] entry %zu", f->adapter, i);
		bytes += strlen(l.entries[i].path) + 1;
	}
	cr_assert_leq(bytes, AIRLOCK_WORKSPACE_LISTDIR_BYTES_MAX);
	airlock_dir_listing_clear(&l);

	/* The count still bounds it too, whichever is smaller. */
	cr_assert_eq(airlock_workspace_listdir(f->ws, dir, 7, &l, &e), 0, "%s", e.message);
	cr_assert_eq(l.n, 7);
	cr_assert(l.truncated);
	airlock_dir_listing_clear(&l);
}

CONTRACT(listdir_errors)
{
	airlock_dir_listing l = { 0 };
	foreign_write(f, "file", "x", 1);
	cr_assert_eq(airlock_workspace_listdir(f->ws, "missing", 10, &l, NULL), -ENOENT);
	cr_assert_eq(airlock_workspace_listdir(f->ws, "file", 10, &l, NULL), -ENOTDIR);
	cr_assert_eq(airlock_workspace_listdir(f->ws, "..", 10, &l, NULL), ESCAPE);
	cr_assert_eq(airlock_workspace_listdir(f->ws, "./", 10, &l, NULL), ESCAPE);
	cr_assert_eq(airlock_workspace_listdir(f->ws, "/", 10, &l, NULL), ESCAPE);
	cr_assert_eq(l.n, 0);
	cr_assert_null(l.entries);
	/* The failures left the workspace as it was. */
	cr_assert_eq(airlock_workspace_listdir(f->ws, ".", 10, &l, NULL), 0);
	cr_assert_eq(l.n, 1);
	airlock_dir_listing_clear(&l);
}

CONTRACT(entry_type_names)
{
	cr_assert_str_eq(airlock_entry_type_name(AIRLOCK_ENTRY_FILE), "file");
	cr_assert_str_eq(airlock_entry_type_name(AIRLOCK_ENTRY_DIRECTORY), "directory");
	cr_assert_str_eq(airlock_entry_type_name(AIRLOCK_ENTRY_SYMLINK), "symlink");
	cr_assert_str_eq(airlock_entry_type_name(AIRLOCK_ENTRY_OTHER), "other");
	cr_assert_str_eq(airlock_entry_type_name((airlock_entry_type)99), "invalid");
}

CONTRACT(memory_state_only_for_memory_workspaces)
{
	airlock_memws *m = airlock_workspace_memory_state(f->ws);
	if (f->mem)
		cr_assert_eq(m, f->mem);
	else
		cr_assert_null(m);
	cr_assert_null(airlock_workspace_memory_state(NULL));
}

/* ---- streams (airlock_workspace_read_stream) ------------------------------ */

typedef struct sink_buf {
	unsigned char *data;
	size_t len, cap;
	size_t calls, biggest;
	size_t fail_after; /* fail the call after this many (0: never) */
} sink_buf;

static int sink_collect(void *arg, const void *buf, size_t len, airlock_error *err)
{
	sink_buf *b = arg;
	if (b->fail_after && b->calls == b->fail_after)
		return airlock_error_set(err, AIRLOCK_ERR_CONFIG, 0, "the sink is full");
	b->calls++;
	if (len > b->biggest)
		b->biggest = len;
	cr_assert_leq(len, b->cap - b->len, "the sink got more than the file");
	memcpy(b->data + b->len, buf, len);
	b->len += len;
	return 0;
}

/* A file bigger than several chunks, its bytes not periodic in the chunk. */
static unsigned char *stream_pattern(size_t n)
{
	unsigned char *p = malloc(n);
	cr_assert_not_null(p);
	uint32_t x = 2463534242u;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
	return p;
}

#define STREAM_BIG (5 * AIRLOCK_WORKSPACE_STREAM_CHUNK + 12345)

CONTRACT(stream_carries_a_large_file_byte_for_byte)
{
	unsigned char *want = stream_pattern(STREAM_BIG);
	foreign_write(f, "out/big.bin", want, STREAM_BIG);
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	cr_assert_eq(util_sha256_hex(want, STREAM_BIG, hex), 0);
	sink_buf b = { .data = malloc(STREAM_BIG), .cap = STREAM_BIG };
	uint64_t size = 0;
	char src[AIRLOCK_SHA256_HEX_LEN + 1] = { 0 };
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "out/big.bin", STREAM_BIG, sink_collect, &b,
	                                           &size, src, &e),
	             0, "[%s] %s", f->adapter, e.message);
	cr_assert_eq(size, STREAM_BIG);
	cr_assert_eq(b.len, STREAM_BIG);
	cr_assert_eq(memcmp(b.data, want, STREAM_BIG), 0, "[%s] bytes differ", f->adapter);
	cr_assert_str_eq(src, hex, "[%s] the source's digest", f->adapter);
	cr_assert_leq(b.biggest, AIRLOCK_WORKSPACE_STREAM_CHUNK);
	cr_assert_geq(b.calls, 6, "[%s] %zu pieces", f->adapter, b.calls);
	free(b.data);
	free(want);
}

CONTRACT(stream_of_an_empty_file)
{
	tool_write(f, "empty", NULL, 0);
	sink_buf b = { .data = malloc(1), .cap = 0 };
	uint64_t size = 99;
	char src[AIRLOCK_SHA256_HEX_LEN + 1] = { 0 };
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "empty", 0, sink_collect, &b, &size, src,
	                                           &e),
	             0, "%s", e.message);
	cr_assert_eq(size, 0);
	cr_assert_eq(b.calls, 0);
	cr_assert_str_eq(src, AIRLOCK_SHA256_EMPTY_HEX);
	free(b.data);
}

CONTRACT(stream_over_max_bytes_is_refused_before_a_byte)
{
	char buf[100];
	memset(buf, 'z', sizeof(buf));
	tool_write(f, "big", buf, sizeof(buf));
	sink_buf b = { .data = malloc(100), .cap = 100 };
	uint64_t size = 7;
	char src[AIRLOCK_SHA256_HEX_LEN + 1] = "untouched";
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "big", 99, sink_collect, &b, &size, src, &e),
	             TOOLVAL, "[%s] %s", f->adapter, e.message);
	cr_assert(strstr(e.message, "more than the 99 allowed"), "[%s] %s", f->adapter, e.message);
	cr_assert_eq(b.calls, 0);
	cr_assert_eq(size, 7);
	cr_assert_str_eq(src, "untouched");
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "big", 100, sink_collect, &b, &size, src, &e),
	             0, "%s", e.message);
	cr_assert_eq(size, 100);
	free(b.data);
}

CONTRACT(stream_errors_as_read)
{
	foreign_write(f, "dir/x", "1", 1);
	sink_buf b = { .data = malloc(1), .cap = 1 };
	uint64_t size = 0;
	char src[AIRLOCK_SHA256_HEX_LEN + 1];
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "missing", 10, sink_collect, &b, &size, src,
	                                           &e),
	             -ENOENT, "[%s] %s", f->adapter, e.message);
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "dir", 10, sink_collect, &b, &size, src, &e),
	             -EISDIR, "[%s] %s", f->adapter, e.message);
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "dir/x/y", 10, sink_collect, &b, &size, src,
	                                           &e),
	             -ENOTDIR, "[%s] %s", f->adapter, e.message);
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "../x", 10, sink_collect, &b, &size, src,
	                                           &e),
	             ESCAPE);
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "/etc/passwd", 10, sink_collect, &b, &size,
	                                           src, &e),
	             ESCAPE);
	cr_assert_eq(b.calls, 0);
	free(b.data);
}

CONTRACT(stream_stops_at_a_failing_sink)
{
	unsigned char *want = stream_pattern(STREAM_BIG);
	foreign_write(f, "big", want, STREAM_BIG);
	sink_buf b = { .data = malloc(STREAM_BIG), .cap = STREAM_BIG, .fail_after = 2 };
	uint64_t size = 7;
	char src[AIRLOCK_SHA256_HEX_LEN + 1] = "untouched";
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "big", STREAM_BIG, sink_collect, &b, &size,
	                                           src, &e),
	             airlock_errcode(AIRLOCK_ERR_CONFIG), "[%s] %s", f->adapter, e.message);
	cr_assert(strstr(e.message, "the sink is full"), "%s", e.message);
	cr_assert_eq(b.calls, 2);
	cr_assert_eq(size, 7);
	cr_assert_str_eq(src, "untouched");
	/* The workspace goes on serving. */
	b = (sink_buf){ .data = b.data, .cap = STREAM_BIG };
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "big", STREAM_BIG, sink_collect, &b, &size,
	                                           src, &e),
	             0, "%s", e.message);
	cr_assert_eq(memcmp(b.data, want, STREAM_BIG), 0);
	free(b.data);
	free(want);
}

/* The pull side: the in-process adapters have it, with the same digest;
 * the remote one says it streams by push only. */
CONTRACT(stream_pull_side)
{
	unsigned char *want = stream_pattern(STREAM_BIG);
	foreign_write(f, "big", want, STREAM_BIG);
	airlock_workspace_stream *s = NULL;
	uint64_t size = 0;
	airlock_error e = { 0 };
	int r = airlock_workspace_stream_open(f->ws, "big", STREAM_BIG, &s, &size, &e);
	if (f->remote) {
		cr_assert_eq(r, airlock_errcode(AIRLOCK_ERR_NOT_IMPLEMENTED), "%s", e.message);
		cr_assert_null(s);
		free(want);
		return;
	}
	cr_assert_eq(r, 0, "%s", e.message);
	cr_assert_eq(size, STREAM_BIG);
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	cr_assert_neq(airlock_workspace_stream_digest(s, hex, &e), 0, "a digest before the end");
	unsigned char *got = malloc(STREAM_BIG + 1);
	size_t off = 0, n = 0;
	do {
		cr_assert_eq(airlock_workspace_stream_read(s, got + off, STREAM_BIG + 1 - off, &n, &e),
		             0, "%s", e.message);
		cr_assert_leq(n, AIRLOCK_WORKSPACE_STREAM_CHUNK);
		off += n;
	} while (n > 0);
	cr_assert_eq(off, STREAM_BIG);
	cr_assert_eq(memcmp(got, want, STREAM_BIG), 0);
	char own[AIRLOCK_SHA256_HEX_LEN + 1];
	cr_assert_eq(util_sha256_hex(want, STREAM_BIG, own), 0);
	cr_assert_eq(airlock_workspace_stream_digest(s, hex, &e), 0, "%s", e.message);
	cr_assert_str_eq(hex, own);
	airlock_workspace_stream_close(s);
	airlock_workspace_stream_close(NULL);
	free(got);
	free(want);
}

/* ==== local directory only ================================================
 * Symlinks and magic links exist only on a real filesystem. */

static void plant(fx *f, const char *target, const char *name)
{
	cr_assert_eq(symlinkat(target, f->dfd, name), 0, "symlink %s: %s", name, strerror(errno));
}

static void outside_init(fx *f)
{
	char p[PBUF];
	snprintf(p, sizeof(p), "%s/secret", f->outside);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, "secret", 6), 6);
	close(fd);
	char rel[PATH_MAX];
	cr_assert(snprintf(rel, sizeof(rel), "../%s", strrchr(f->outside, '/') + 1) <
	          (int)sizeof(rel));
	plant(f, f->outside, "out_abs");
	plant(f, rel, "out_rel");
	snprintf(p, sizeof(p), "%s/secret", f->outside);
	plant(f, p, "out_file");
	snprintf(p, sizeof(p), "%s/secret", rel);
	plant(f, p, "out_file_rel");
}

static void expect_all_ops_escape(fx *f, const char *path)
{
	airlock_error e = { 0 };
	unsigned char *data = NULL;
	size_t len = 0;
	airlock_dir_listing l = { 0 };
	airlock_provenance p;
	char *out = NULL;
	cr_assert_eq(airlock_workspace_resolve(f->ws, path, strlen(path), &out, &e), ESCAPE,
	             "resolve %s", path);
	cr_assert_eq(airlock_workspace_read(f->ws, path, 100, &data, &len, &e), ESCAPE, "read %s",
	             path);
	cr_assert_eq(airlock_workspace_write(f->ws, path, "pwn", 3, &e), ESCAPE, "write %s", path);
	cr_assert_eq(airlock_workspace_listdir(f->ws, path, 10, &l, &e), ESCAPE, "listdir %s",
	             path);
	cr_assert_eq(airlock_workspace_provenance(f->ws, path, &p, &e), ESCAPE, "provenance %s",
	             path);
}

static void expect_secret_intact(fx *f)
{
	char p[PBUF];
	snprintf(p, sizeof(p), "%s/secret", f->outside);
	char buf[32] = { 0 };
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	cr_assert(fd >= 0, "secret replaced or gone");
	cr_assert_eq(read(fd, buf, sizeof(buf) - 1), 6);
	close(fd);
	cr_assert_str_eq(buf, "secret");
	/* Nothing but the secret lives outside. */
	DIR *d = opendir(f->outside);
	cr_assert(d);
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	cr_assert_eq(n, 1, "something was created outside the workspace");
}

Test(local_only, symlink_to_outside_is_rejected_everywhere, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	outside_init(f);
	static const char *const paths[] = {
		"out_abs",      "out_abs/secret", "out_abs/new",  "out_rel",
		"out_rel/secret", "out_rel/new",  "out_file",     "out_file_rel",
	};
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
		expect_all_ops_escape(f, paths[i]);
	expect_secret_intact(f);
}

Test(local_only, symlink_chain_inside_is_accepted, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	foreign_write(f, "sub/real/data.txt", "inside", 6);
	plant(f, "l2", "l1");
	plant(f, "sub/l3", "l2");
	plant(f, "real", "sub/l3");
	plant(f, "../sub", "sub/up_and_back"); /* ".." that stays inside */
	expect_resolves(f, S("l1"));
	expect_resolves(f, S("l1/data.txt"));
	expect_resolves(f, S("l1/not-yet"));
	expect_resolves(f, S("sub/up_and_back/real"));
	unsigned char *data = NULL;
	size_t len = 0;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_read(f->ws, "l1/data.txt", 100, &data, &len, &e), 0, "%s",
	             e.message);
	cr_assert_eq(len, 6);
	free(data);
	tool_write(f, "l1/new.txt", "via chain", 9);
	struct stat st;
	cr_assert_eq(fstatat(f->dfd, "sub/real/new.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert(S_ISREG(st.st_mode));
}

Test(local_only, symlink_chain_ending_outside_is_rejected, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	outside_init(f);
	mkdirat(f->dfd, "sub", 0755);
	plant(f, "c2", "c1");
	plant(f, "sub/c3", "c2");
	plant(f, "../out_rel", "sub/c3");
	plant(f, "../../../../../../../../../../../../../", "deep_up");
	plant(f, "loop_b", "loop_a");
	plant(f, "loop_a", "loop_b");
	plant(f, "..", "dotdot");
	expect_all_ops_escape(f, "c1");
	expect_all_ops_escape(f, "c1/secret");
	expect_all_ops_escape(f, "deep_up");
	expect_all_ops_escape(f, "deep_up/tmp");
	expect_all_ops_escape(f, "loop_a");
	expect_all_ops_escape(f, "loop_a/x");
	expect_all_ops_escape(f, "dotdot");
	expect_all_ops_escape(f, "dotdot/x");
	expect_secret_intact(f);
}

Test(local_only, absolute_symlink_back_inside_is_rejected, .init = local_init, .fini = fx_fini)
{
	/* RESOLVE_BENEATH refuses any absolute jump, even one that lands inside:
	 * the check is "never left", not "ended up inside". */
	fx *f = &g_fx;
	char p[PBUF];
	foreign_write(f, "sub/x", "x", 1);
	snprintf(p, sizeof(p), "%s/sub", f->dir);
	plant(f, p, "abs_in");
	expect_all_ops_escape(f, "abs_in");
	expect_all_ops_escape(f, "abs_in/x");
}

Test(local_only, magic_links_are_rejected, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	outside_init(f);
	char p[64];
	plant(f, "/proc/self/cwd", "magic_cwd");
	plant(f, "/proc/self/root", "magic_root");
	snprintf(p, sizeof(p), "/proc/self/fd/%d", f->dfd);
	plant(f, p, "magic_fd");
	plant(f, "../../../../../../../../../../proc/self/root", "magic_rel");
	static const char *const paths[] = {
		"magic_cwd", "magic_cwd/x", "magic_root", "magic_root/etc/passwd",
		"magic_fd",  "magic_fd/x",  "magic_rel",  "magic_rel/tmp",
	};
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
		expect_all_ops_escape(f, paths[i]);
	expect_secret_intact(f);
}

Test(local_only, adapter_refuses_escapes_at_use, .init = local_init, .fini = fx_fini)
{
	/* Called beneath the core's check, as if a symlink had been swapped in
	 * after contain(): the adapter's own opens must refuse. */
	fx *f = &g_fx;
	outside_init(f);
	const airlock_workspace_ops *ops = f->ws->ops;
	void *ctx = f->ws->ctx;
	unsigned char *data = NULL;
	size_t len = 0;
	airlock_dir_listing l = { 0 };
	airlock_provenance p;
	airlock_error e = { 0 };
	cr_assert_eq(ops->read(ctx, "out_abs/secret", 100, &data, &len, &e), ESCAPE, "%s",
	             e.message);
	cr_assert_eq(ops->read(ctx, "out_file_rel", 100, &data, &len, &e), ESCAPE, "%s", e.message);
	cr_assert_eq(ops->write(ctx, "out_abs/new", "x", 1, &e), ESCAPE, "%s", e.message);
	cr_assert_eq(ops->write(ctx, "out_rel/new", "x", 1, &e), ESCAPE, "%s", e.message);
	cr_assert_eq(ops->listdir(ctx, "out_abs", 10, &l, &e), ESCAPE, "%s", e.message);
	cr_assert_eq(ops->provenance(ctx, "out_abs/secret", &p, &e), ESCAPE, "%s", e.message);
	/* The message names the workspace-relative path, never the host one. */
	cr_assert_null(strstr(e.message, f->dir), "%s", e.message);
	cr_assert_null(strstr(e.message, "/tmp"), "%s", e.message);
	expect_secret_intact(f);
}

Test(local_only, write_never_follows_a_final_symlink, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	outside_init(f);
	foreign_write(f, "target.txt", "original", 8);
	plant(f, "target.txt", "inlink");
	plant(f, "not-there.txt", "dangling");

	/* Inside targets: the link itself is replaced by a regular file. */
	tool_write(f, "inlink", "new", 3);
	tool_write(f, "dangling", "new", 3);
	struct stat st;
	cr_assert_eq(fstatat(f->dfd, "inlink", &st, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(fstatat(f->dfd, "dangling", &st, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(fstatat(f->dfd, "not-there.txt", &st, AT_SYMLINK_NOFOLLOW), -1);
	unsigned char *data = NULL;
	size_t len = 0;
	cr_assert_eq(airlock_workspace_read(f->ws, "target.txt", 100, &data, &len, NULL), 0);
	cr_assert_eq(len, 8);
	free(data);

	/* Outside targets, straight to the adapter: the link is replaced and
	 * the secret is untouched. */
	airlock_error e = { 0 };
	cr_assert_eq(f->ws->ops->write(f->ws->ctx, "out_file", "pwned", 5, &e), 0, "%s",
	             e.message);
	cr_assert_eq(fstatat(f->dfd, "out_file", &st, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert(S_ISREG(st.st_mode));
	expect_secret_intact(f);
}

Test(local_only, provenance_sees_rename_and_symlink_swaps, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	tool_write(f, "a", "aaaa", 4);
	tool_write(f, "b", "bbbb", 4);
	/* Replaced by rename: new inode. */
	foreign_write(f, "a.new", "aaaa", 4);
	cr_assert_eq(renameat(f->dfd, "a.new", f->dfd, "a"), 0);
	cr_assert_eq(prov(f, "a"), AIRLOCK_PROVENANCE_UNKNOWN);
	/* Replaced by a symlink to another tool-written file. */
	cr_assert_eq(unlinkat(f->dfd, "a", 0), 0);
	plant(f, "b", "a");
	cr_assert_eq(prov(f, "a"), AIRLOCK_PROVENANCE_UNKNOWN);
	cr_assert_eq(prov(f, "b"), AIRLOCK_PROVENANCE_TOOL_WRITTEN);
	/* Only touched (ctime moves): no longer provably the tool's bytes. */
	cr_assert_eq(fchmodat(f->dfd, "b", 0600, 0), 0);
	cr_assert_eq(prov(f, "b"), AIRLOCK_PROVENANCE_UNKNOWN);
	/* A hard link elsewhere has no record of its own. */
	tool_write(f, "c", "cccc", 4);
	cr_assert_eq(linkat(f->dfd, "c", f->dfd, "c2", 0), 0);
	cr_assert_eq(prov(f, "c2"), AIRLOCK_PROVENANCE_UNKNOWN);
}

Test(local_only, foreign_value_is_the_adapters, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	airlock_workspace *w = NULL;
	airlock_error e = { 0 };
	int fd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_eq(airlock_workspace_local_new(fd, AIRLOCK_PROVENANCE_SANDBOX_WRITTEN, &w, &e), 0);
	foreign_write(f, "f", "x", 1);
	airlock_provenance p;
	cr_assert_eq(airlock_workspace_provenance(w, "f", &p, &e), 0);
	cr_assert_eq(p, AIRLOCK_PROVENANCE_SANDBOX_WRITTEN);
	cr_assert_eq(airlock_workspace_write(w, "g", "y", 1, &e), 0);
	cr_assert_eq(airlock_workspace_provenance(w, "g", &p, &e), 0);
	cr_assert_eq(p, AIRLOCK_PROVENANCE_TOOL_WRITTEN);
	airlock_workspace_free(w);

	/* TOOL_WRITTEN as the foreign value would launder everything. */
	fd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_eq(airlock_workspace_local_new(fd, AIRLOCK_PROVENANCE_TOOL_WRITTEN, &w, &e),
	             -EINVAL);
	cr_assert_eq(fcntl(fd, F_GETFD), -1, "descriptor not taken on failure");
	/* Not a directory. */
	fd = openat(f->dfd, "f", O_RDONLY | O_CLOEXEC);
	cr_assert_eq(airlock_workspace_local_new(fd, AIRLOCK_PROVENANCE_UNKNOWN, &w, &e), -ENOTDIR);
}

Test(local_only, fifo_and_special_files_are_not_read, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	cr_assert_eq(mkfifoat(f->dfd, "pipe", 0644), 0);
	unsigned char *data = NULL;
	size_t len = 0;
	airlock_error e = { 0 };
	/* Must return at once rather than block in open(). */
	cr_assert_eq(airlock_workspace_read(f->ws, "pipe", 100, &data, &len, &e), TOOLVAL, "%s",
	             e.message);
	airlock_dir_listing l = { 0 };
	cr_assert_eq(airlock_workspace_listdir(f->ws, ".", 10, &l, NULL), 0);
	cr_assert_eq(l.n, 1);
	cr_assert_eq(l.entries[0].type, AIRLOCK_ENTRY_OTHER);
	airlock_dir_listing_clear(&l);
	plant(f, "pipe", "link");
	cr_assert_eq(airlock_workspace_listdir(f->ws, ".", 10, &l, NULL), 0);
	cr_assert_eq(l.n, 2);
	cr_assert_str_eq(l.entries[0].path, "link");
	cr_assert_eq(l.entries[0].type, AIRLOCK_ENTRY_SYMLINK);
	airlock_dir_listing_clear(&l);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n++;
	closedir(d);
	return n;
}

/* The provenance table is bounded in bytes, not only in paths (100,000
 * records of 4-7 KB each under long paths, kept after
 * their files were deleted). A write past the bound is refused; a record
 * whose file is gone is dropped when provenance() sees it, and a full table
 * is swept of such records before a write is refused. */
Test(local_only, provenance_table_is_bounded_in_bytes, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	enum { TRIES = 4000 };
	long_dir_make(f->dfd);
	airlock_error e = { 0 };
	int written = 0, r = 0;
	for (; written < TRIES; written++) {
		r = airlock_workspace_write(f->ws, long_path(written), "x", 1, &e);
		if (r < 0)
			break;
	}
	cr_assert_eq(r, -ENOSPC, "%d writes of %zu-byte paths, none refused (%s)", written,
	             strlen(long_path(0)), e.message);
	cr_assert(strstr(e.message, "provenance record is full"), "%s", e.message);
	/* Refused at the byte bound: the records held cost at most that. */
	size_t each = strlen(long_path(0)) + 1 + 96;
	cr_assert_leq((size_t)written * each, AIRLOCK_LOCAL_RECORDS_BYTES_MAX + each,
	              "%d records of %zu bytes", written, each);
	cr_assert_geq((size_t)(written + 1) * (each + 32), AIRLOCK_LOCAL_RECORDS_BYTES_MAX);
	cr_assert_eq(prov(f, long_path(0)), AIRLOCK_PROVENANCE_TOOL_WRITTEN);

	/* A deleted file's record goes when provenance() sees it gone: one
	 * more path fits, and then the table is full again. */
	cr_assert_eq(unlinkat(f->dfd, long_path(0), 0), 0);
	cr_assert_eq(prov(f, long_path(0)), AIRLOCK_PROVENANCE_UNKNOWN);
	tool_write(f, long_path(TRIES), "x", 1);
	cr_assert_eq(airlock_workspace_write(f->ws, long_path(TRIES + 1), "x", 1, &e), -ENOSPC);

	/* Files deleted behind its back (as a sandbox does) are swept once the
	 * table is full (at most once a second). */
	for (int i = 1; i < written; i++)
		cr_assert_eq(unlinkat(f->dfd, long_path(i), 0), 0);
	usleep(1100 * 1000);
	for (int i = 0; i < written - 2; i++)
		tool_write(f, long_path(TRIES + 1 + i), "x", 1);
	cr_assert_eq(prov(f, long_path(TRIES + 1)), AIRLOCK_PROVENANCE_TOOL_WRITTEN);
}

Test(local_only, no_descriptor_leaks_on_any_path, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	outside_init(f);
	foreign_write(f, "dir/x", "x", 1);
	int before = count_fds();
	for (int i = 0; i < 50; i++) {
		unsigned char *data = NULL;
		size_t len = 0;
		airlock_dir_listing l = { 0 };
		airlock_provenance p;
		char *out = NULL;
		tool_write(f, "dir/t", "t", 1);
		(void)airlock_workspace_write(f->ws, "dir", "t", 1, NULL);
		(void)airlock_workspace_write(f->ws, "nodir/t", "t", 1, NULL);
		(void)f->ws->ops->write(f->ws->ctx, "out_abs/x", "t", 1, NULL);
		if (airlock_workspace_read(f->ws, "dir/t", 100, &data, &len, NULL) == 0)
			free(data);
		(void)airlock_workspace_read(f->ws, "dir/t", 0, &data, &len, NULL);
		(void)airlock_workspace_read(f->ws, "dir", 100, &data, &len, NULL);
		(void)f->ws->ops->read(f->ws->ctx, "out_file", 100, &data, &len, NULL);
		if (airlock_workspace_listdir(f->ws, "dir", 10, &l, NULL) == 0)
			airlock_dir_listing_clear(&l);
		(void)airlock_workspace_listdir(f->ws, "dir/x", 10, &l, NULL);
		(void)airlock_workspace_provenance(f->ws, "dir/t", &p, NULL);
		(void)airlock_workspace_provenance(f->ws, "out_abs/x", &p, NULL);
		if (airlock_workspace_resolve(f->ws, "no/such/deep/path", 17, &out, NULL) == 0)
			free(out);
		(void)airlock_workspace_resolve(f->ws, "out_abs/x", 9, &out, NULL);
	}
	cr_assert_eq(count_fds(), before, "descriptors leaked");
}

/* A stream follows no symlink anywhere on its path, even one that stays
 * inside (read follows those): what an export carries out is exactly the
 * file at the path named. */
static void stream_symlink_refused(fx *f)
{
	foreign_write(f, "real/file", "secret", 6);
	plant(f, "real/file", "link");
	plant(f, "real", "dirlink");
	sink_buf b = { .data = malloc(16), .cap = 16 };
	uint64_t size = 0;
	char src[AIRLOCK_SHA256_HEX_LEN + 1];
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "link", 16, sink_collect, &b, &size, src,
	                                           &e),
	             TOOLVAL, "%s", e.message);
	cr_assert(strstr(e.message, "symbolic link"), "%s", e.message);
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "dirlink/file", 16, sink_collect, &b, &size,
	                                           src, &e),
	             TOOLVAL, "%s", e.message);
	cr_assert_eq(b.calls, 0);
	/* The file itself streams. */
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "real/file", 16, sink_collect, &b, &size,
	                                           src, &e),
	             0, "%s", e.message);
	cr_assert_eq(size, 6);
	free(b.data);
}

Test(local_only, stream_follows_no_symlink, .init = local_init, .fini = fx_fini)
{
	stream_symlink_refused(&g_fx);
}

Test(contract_volume, stream_follows_no_symlink, .init = volume_init, .fini = fx_fini)
{
	stream_symlink_refused(&g_fx);
}

Test(local_only, stream_of_a_fifo_is_refused_at_once, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	cr_assert_eq(mkfifoat(f->dfd, "pipe", 0644), 0);
	sink_buf b = { .data = malloc(1), .cap = 1 };
	uint64_t size = 0;
	char src[AIRLOCK_SHA256_HEX_LEN + 1];
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_read_stream(f->ws, "pipe", 16, sink_collect, &b, &size, src,
	                                           &e),
	             TOOLVAL, "%s", e.message);
	free(b.data);
}

/* A socket a sandbox bound in its workspace: open(2) of one is ENXIO, which
 * is no failure of the service's; a read and a stream refuse it as the
 * FIFO is refused, not a regular file (ToolValidationError), and the
 * service does not answer it as itself unavailable. */
Test(local_only, a_socket_is_not_a_regular_file_for_read_or_stream, .init = local_init,
     .fini = fx_fini)
{
	fx *f = &g_fx;
	int sfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(sfd, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d/sock", f->dfd);
	cr_assert_lt((size_t)n, sizeof(a.sun_path));
	cr_assert_eq(bind(sfd, (struct sockaddr *)&a, sizeof(a)), 0, "%s", strerror(errno));
	close(sfd);
	unsigned char *data = NULL;
	size_t len = 0;
	airlock_error e = { 0 };
	cr_expect_eq(airlock_workspace_read(f->ws, "sock", 100, &data, &len, &e), TOOLVAL, "%s",
	             e.message);
	cr_expect(strstr(e.message, "not a regular file"), "%s", e.message);
	sink_buf b = { .data = malloc(1), .cap = 1 };
	uint64_t size = 0;
	char src[AIRLOCK_SHA256_HEX_LEN + 1];
	airlock_error_clear(&e);
	cr_expect_eq(airlock_workspace_read_stream(f->ws, "sock", 16, sink_collect, &b, &size, src,
	                                           &e),
	             TOOLVAL, "%s", e.message);
	cr_expect(strstr(e.message, "not a regular file"), "%s", e.message);
	free(b.data);
}

/* Read a pull stream to its end: 0, or the first error's code. */
static int stream_drain(airlock_workspace_stream *s, airlock_error *e)
{
	static unsigned char buf[AIRLOCK_WORKSPACE_STREAM_CHUNK];
	size_t n = 0;
	do {
		int r = airlock_workspace_stream_read(s, buf, sizeof(buf), &n, e);
		if (r < 0)
			return r;
	} while (n > 0);
	return 0;
}

/* A file written while it is read fails the stream at its end, never
 * hands out a mixture under one digest. */
Test(local_only, stream_of_a_file_changed_while_read_fails, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	unsigned char *want = stream_pattern(STREAM_BIG);
	foreign_write(f, "big", want, STREAM_BIG);
	airlock_workspace_stream *s = NULL;
	uint64_t size = 0;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_stream_open(f->ws, "big", STREAM_BIG, &s, &size, &e), 0, "%s",
	             e.message);
	static unsigned char buf[AIRLOCK_WORKSPACE_STREAM_CHUNK];
	size_t n = 0;
	cr_assert_eq(airlock_workspace_stream_read(s, buf, sizeof(buf), &n, &e), 0);
	/* In place, same size, same inode: only the times say it. */
	int fd = openat(f->dfd, "big", O_WRONLY | O_CLOEXEC);
	cr_assert(fd >= 0);
	cr_assert_eq(pwrite(fd, "X", 1, STREAM_BIG - 1), 1);
	close(fd);
	cr_assert_eq(stream_drain(s, &e), -EAGAIN, "%s", e.message);
	cr_assert(strstr(e.message, "changed while it was read"), "%s", e.message);
	char hex[AIRLOCK_SHA256_HEX_LEN + 1];
	cr_assert_neq(airlock_workspace_stream_digest(s, hex, NULL), 0);
	airlock_workspace_stream_close(s);

	/* Shrunk under the reader. */
	foreign_write(f, "big", want, STREAM_BIG);
	cr_assert_eq(airlock_workspace_stream_open(f->ws, "big", STREAM_BIG, &s, &size, &e), 0);
	fd = openat(f->dfd, "big", O_WRONLY | O_CLOEXEC);
	cr_assert_eq(ftruncate(fd, 10), 0);
	close(fd);
	cr_assert_eq(stream_drain(s, &e), -EAGAIN, "%s", e.message);
	airlock_workspace_stream_close(s);
	free(want);
}

/* The owner's end does not wait for a stream between its pieces, and a
 * piece after it fails instead of touching a freed adapter. */
Test(local_only, stream_outlived_by_nothing_after_destroy, .init = local_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	unsigned char *want = stream_pattern(STREAM_BIG);
	foreign_write(f, "big", want, STREAM_BIG);
	int before = count_fds();
	airlock_workspace_stream *s = NULL;
	uint64_t size = 0;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_stream_open(f->ws, "big", STREAM_BIG, &s, &size, &e), 0);
	airlock_workspace_free(f->ws);
	f->ws = NULL;
	static unsigned char buf[64];
	size_t n = 0;
	cr_assert_eq(airlock_workspace_stream_read(s, buf, sizeof(buf), &n, &e),
	             airlock_errcode(AIRLOCK_ERR_EXECUTION_REJECTED), "%s", e.message);
	airlock_workspace_stream_close(s);
	/* The workspace's own descriptor and the file's are gone. */
	cr_assert_eq(count_fds(), before - 1);
	free(want);
}

/* ==== memory only =========================================================
 * The fake mechanism's side of the in-memory workspace (memws.h). */

Test(memory_only, sandbox_write_is_sandbox_written, .init = memory_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	tool_write(f, "t", "tool", 4);
	cr_assert_eq(memws_sandbox_write(f->mem, "t", "tool", 4), 0);
	cr_assert_eq(prov(f, "t"), AIRLOCK_PROVENANCE_SANDBOX_WRITTEN);
	cr_assert_eq(memws_sandbox_write(f->mem, "../t", "x", 1), -EINVAL);
	cr_assert_eq(memws_sandbox_write(f->mem, "/t", "x", 1), -EINVAL);
}

Test(memory_only, file_and_directory_conflicts, .init = memory_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	cr_assert_eq(memws_sandbox_write(f->mem, "f", "x", 1), 0);
	cr_assert_eq(memws_sandbox_write(f->mem, "f/x", "x", 1), -ENOTDIR);
	cr_assert_eq(memws_sandbox_write(f->mem, "d/x", "x", 1), 0);
	cr_assert_eq(memws_sandbox_write(f->mem, "d", "x", 1), -EISDIR);
	cr_assert_eq(memws_sandbox_delete(f->mem, "d/x"), 0);
	cr_assert_eq(memws_sandbox_delete(f->mem, "d/x"), 0);
	/* The directory went with its last file. */
	cr_assert_eq(memws_sandbox_write(f->mem, "d", "x", 1), 0);
}

Test(memory_only, limits_are_enforced, .init = memory_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	memws_set_limits(f->mem, 10, 2);
	cr_assert_eq(memws_sandbox_write(f->mem, "a", "12345", 5), 0);
	cr_assert_eq(memws_sandbox_write(f->mem, "b", "123456", 6), -ENOSPC);
	cr_assert_eq(memws_sandbox_write(f->mem, "b", "12345", 5), 0);
	cr_assert_eq(memws_sandbox_write(f->mem, "c", "", 0), -ENOSPC);
	/* Replacing counts the new size against the old. */
	cr_assert_eq(memws_sandbox_write(f->mem, "a", "1", 1), 0);
	cr_assert_eq(airlock_workspace_write(f->ws, "b", "123456789", 9, NULL), 0);
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_write(f->ws, "a", "12", 2, &e), -ENOSPC);
	cr_assert_eq(airlock_workspace_write(f->ws, "c", "", 0, &e), -ENOSPC);
	/* A refused write changed nothing. */
	unsigned char *data = NULL;
	size_t len = 0;
	cr_assert_eq(airlock_workspace_read(f->ws, "a", 10, &data, &len, NULL), 0);
	cr_assert_eq(len, 1);
	free(data);
	cr_assert_eq(prov(f, "a"), AIRLOCK_PROVENANCE_SANDBOX_WRITTEN);
	memws_set_limits(f->mem, 0, 0);
	cr_assert_eq(memws_sandbox_write(f->mem, "c", "", 0), 0);
}

/* The table of paths has a byte bound of its own (every
 * per-sandbox table is bounded in bytes): without it a million files of
 * long paths were 4 GB of the service, whatever the workspace's limits. */
Test(memory_only, path_table_is_bounded_in_bytes, .init = memory_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	long_dir_make(-1);
	size_t each = strlen(long_path(0)) + 1, fit = AIRLOCK_MEMWS_PATH_BYTES_HARD / each;
	int i = 0, r = 0;
	for (; i < (int)fit + 100; i++)
		if ((r = memws_sandbox_write(f->mem, long_path(i), "", 0)) < 0)
			break;
	cr_assert_eq(r, -ENOSPC, "%d paths of %zu bytes, none refused", i, each);
	cr_assert_eq((size_t)i, fit);
	/* Replacing a file costs no more path; a deleted one gives its back. */
	cr_assert_eq(memws_sandbox_write(f->mem, long_path(0), "x", 1), 0);
	cr_assert_eq(memws_sandbox_delete(f->mem, long_path(1)), 0);
	cr_assert_eq(memws_sandbox_write(f->mem, long_path(i), "", 0), 0);
	cr_assert_eq(memws_sandbox_write(f->mem, long_path(i + 1), "", 0), -ENOSPC);
}

Test(memory_only, stream_of_a_file_changed_while_read_fails, .init = memory_init,
     .fini = fx_fini)
{
	fx *f = &g_fx;
	unsigned char *want = stream_pattern(STREAM_BIG);
	foreign_write(f, "big", want, STREAM_BIG);
	airlock_workspace_stream *s = NULL;
	uint64_t size = 0;
	airlock_error e = { 0 };
	cr_assert_eq(airlock_workspace_stream_open(f->ws, "big", STREAM_BIG, &s, &size, &e), 0);
	static unsigned char buf[AIRLOCK_WORKSPACE_STREAM_CHUNK];
	size_t n = 0;
	cr_assert_eq(airlock_workspace_stream_read(s, buf, sizeof(buf), &n, &e), 0);
	cr_assert_eq(memws_sandbox_write(f->mem, "big", want, STREAM_BIG), 0);
	cr_assert_eq(airlock_workspace_stream_read(s, buf, sizeof(buf), &n, &e), -EAGAIN, "%s",
	             e.message);
	airlock_workspace_stream_close(s);
	/* Deleted under the reader. */
	cr_assert_eq(airlock_workspace_stream_open(f->ws, "big", STREAM_BIG, &s, &size, &e), 0);
	cr_assert_eq(memws_sandbox_delete(f->mem, "big"), 0);
	cr_assert_eq(airlock_workspace_stream_read(s, buf, sizeof(buf), &n, &e), -EAGAIN);
	airlock_workspace_stream_close(s);
	free(want);
}

Test(memory_only, snapshot_and_hash, .init = memory_init, .fini = fx_fini)
{
	fx *f = &g_fx;
	cr_assert_eq(memws_sandbox_write(f->mem, "z", "zz", 2), 0);
	tool_write(f, "a", "abc", 3);
	cr_assert_eq(memws_sandbox_write(f->mem, "m/n", "", 0), 0);

	airlock_snapshot s1 = { 0 }, s2 = { 0 };
	cr_assert_eq(memws_snapshot(f->mem, &s1), 0);
	cr_assert_eq(s1.n, 3);
	cr_assert_str_eq(s1.entries[0].path, "a");
	cr_assert_str_eq(s1.entries[1].path, "m/n");
	cr_assert_str_eq(s1.entries[2].path, "z");
	cr_assert_eq(s1.entries[0].size, 3);

	/* Same size, new bytes: the version moves, the id does not. */
	cr_assert_eq(memws_sandbox_write(f->mem, "a", "xyz", 3), 0);
	cr_assert_eq(memws_snapshot(f->mem, &s2), 0);
	cr_assert_eq(s2.entries[0].ino, s1.entries[0].ino);
	cr_assert_gt(s2.entries[0].version, s1.entries[0].version);
	cr_assert_eq(s2.entries[2].version, s1.entries[2].version);
	cr_assert_neq(s2.entries[0].ino, s2.entries[2].ino);
	snapshot_clear(&s1);
	snapshot_clear(&s2);

	char want[65];
	airlock_snapshot_hashed h = { .size = -1 };
	cr_assert_eq(memws_hash(f->mem, "a", 0, &h, NULL), 0);
	cr_assert_eq(util_sha256_hex("xyz", 3, want), 0);
	cr_assert_str_eq(h.hex, want);
	cr_assert_eq(h.size, 3);
	cr_assert_eq(h.kind, AIRLOCK_FILE_REGULAR);
	cr_assert_eq(memws_hash(f->mem, "gone", 0, &h, NULL), -ENOENT);
}
