/* SPDX-License-Identifier: Apache-2.0 */
#ifndef AIRLOCK_TESTS_WORKSPACE_ORACLE_H
#define AIRLOCK_TESTS_WORKSPACE_ORACLE_H

/*
 * The oracle for gate.sandbox.workspace_containment, shared by the property
 * test (tests/test_gate_sandbox_workspace_containment.c) and the fuzz target
 * (fuzz/fuzz_resolve.c), so the two assert one property.
 *
 * It is deliberately independent of the code under test: the string rules
 * are restated from the specification's text, and rule 3 is decided by a
 * user-space walk (lstat + readlink, one component at a time, like the
 * kernel's own walk but with none of its code) plus glibc's realpath(3) on
 * the longest existing prefix. Neither uses openat2.
 *
 * The walk implements RESOLVE_BENEATH's meaning: a path escapes if any step
 * of its resolution leaves the root — a ".." above it, an absolute symlink
 * (even one pointing back inside), a magic link — not only if it ends
 * outside. A missing component ends the walk inside (the kernel would stop
 * there with ENOENT), and so does a non-directory in the middle (ENOTDIR).
 */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- a small deterministic PRNG (splitmix64) ----------------------------- */
typedef struct oracle_rng {
	uint64_t s;
} oracle_rng;

static inline uint64_t oracle_next(oracle_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline size_t oracle_below(oracle_rng *r, size_t n)
{
	return n ? (size_t)(oracle_next(r) % n) : 0;
}

/* ---- the string rules, restated from the specification ------------------- */
/* Rules 1, 2 and 4 on raw bytes; "/workspace/" is 11 bytes. */
static inline bool oracle_string_ok(const unsigned char *in, size_t len)
{
	if (len == 0 || in[0] == '/' || 11 + len > 4096)
		return false;
	size_t comp = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && in[i] == 0)
			return false;
		if (i < len && in[i] != '/') {
			comp++;
			continue;
		}
		const unsigned char *c = in + i - comp;
		if (comp == 0 || comp > 255 || (comp == 1 && c[0] == '.') ||
		    (comp == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		comp = 0;
	}
	return true;
}

/* ---- rule 3 by a user-space walk ----------------------------------------- */
typedef enum oracle_verdict {
	ORACLE_INSIDE = 0,
	ORACLE_ESCAPES,
	ORACLE_LOOP,
	ORACLE_ERROR, /* the oracle itself could not decide (reported, fails) */
} oracle_verdict;

#define ORACLE_MAXSYMLINKS 40
#define ORACLE_BUF 16384

/*
 * Walk rel (NUL-free) from root_real (an absolute path with no symlinks) and
 * say whether its resolution stays beneath the root. why receives a reason
 * for ORACLE_ERROR.
 */
static inline oracle_verdict oracle_walk(const char *root_real, const char *rel, char *why,
                                         size_t whylen)
{
	static char cur[ORACLE_BUF], rest[ORACLE_BUF], tmp[ORACLE_BUF], target[PATH_MAX + 1];
	size_t rootlen = strlen(root_real);
	int links = 0;

	snprintf(cur, sizeof(cur), "%s", root_real);
	if (snprintf(rest, sizeof(rest), "%s", rel) >= (int)sizeof(rest)) {
		snprintf(why, whylen, "input too long for the oracle");
		return ORACLE_ERROR;
	}
	size_t pos = 0;
	for (;;) {
		while (rest[pos] == '/')
			pos++;
		if (!rest[pos])
			return ORACLE_INSIDE;
		size_t end = pos;
		while (rest[end] && rest[end] != '/')
			end++;
		size_t clen = end - pos;
		const char *c = rest + pos;
		bool more = false;
		for (size_t k = end; rest[k]; k++)
			if (rest[k] != '/') {
				more = true;
				break;
			}
		if (clen == 1 && c[0] == '.') {
			pos = end;
			continue;
		}
		if (clen == 2 && c[0] == '.' && c[1] == '.') {
			size_t curlen = strlen(cur);
			if (curlen <= rootlen)
				return ORACLE_ESCAPES; /* ".." above the root */
			char *slash = strrchr(cur, '/');
			*slash = 0;
			pos = end;
			continue;
		}
		size_t curlen = strlen(cur);
		if (curlen + 1 + clen >= sizeof(tmp)) {
			snprintf(why, whylen, "resolved path too long for the oracle");
			return ORACLE_ERROR;
		}
		memcpy(tmp, cur, curlen);
		tmp[curlen] = '/';
		memcpy(tmp + curlen + 1, c, clen);
		tmp[curlen + 1 + clen] = 0;

		struct stat st;
		if (lstat(tmp, &st) < 0) {
			if (errno == ENOENT || errno == ENOTDIR)
				return ORACLE_INSIDE; /* nothing there yet: ends here */
			snprintf(why, whylen, "lstat: %s", strerror(errno));
			return ORACLE_ERROR;
		}
		if (S_ISLNK(st.st_mode)) {
			if (++links > ORACLE_MAXSYMLINKS)
				return ORACLE_LOOP;
			ssize_t n = readlink(tmp, target, sizeof(target) - 1);
			if (n < 0) {
				snprintf(why, whylen, "readlink: %s", strerror(errno));
				return ORACLE_ERROR;
			}
			target[n] = 0;
			/* An absolute target restarts at the host's "/", which is
			 * outside the root whatever it names afterwards. */
			if (target[0] == '/')
				return ORACLE_ESCAPES;
			if ((size_t)n + 1 + strlen(rest + end) >= sizeof(tmp)) {
				snprintf(why, whylen, "symlink expansion too long for the oracle");
				return ORACLE_ERROR;
			}
			size_t tail = strlen(rest + end);
			memcpy(tmp, target, (size_t)n);
			tmp[n] = '/';
			memcpy(tmp + n + 1, rest + end, tail + 1);
			memcpy(rest, tmp, (size_t)n + 1 + tail + 1);
			pos = 0;
			continue;
		}
		memcpy(cur, tmp, strlen(tmp) + 1);
		pos = end;
		if (more && !S_ISDIR(st.st_mode))
			return ORACLE_INSIDE; /* ENOTDIR: the walk cannot go on */
	}
}

/* The second, coarser opinion: realpath(3) of the longest prefix that has
 * one must be the root or under it. */
static inline bool oracle_realpath_inside(const char *root_real, const char *rel)
{
	static char path[ORACLE_BUF], real[PATH_MAX];
	size_t rootlen = strlen(root_real);
	if (snprintf(path, sizeof(path), "%s/%s", root_real, rel) >= (int)sizeof(path))
		return false;
	for (;;) {
		if (realpath(path, real))
			return strncmp(real, root_real, rootlen) == 0 &&
			       (real[rootlen] == 0 || real[rootlen] == '/');
		char *slash = strrchr(path, '/');
		if (!slash || (size_t)(slash - path) < rootlen)
			return false;
		*slash = 0;
	}
}

/* ---- the planted tree ----------------------------------------------------- */
typedef struct oracle_tree {
	char root[PATH_MAX];  /* the workspace directory (mkdtemp) */
	char outside[PATH_MAX]; /* a sibling holding a "secret" */
	char root_real[PATH_MAX];
} oracle_tree;

/* Symlink names planted in the root, for generators and corpora. */
static const char *const oracle_link_names[] = {
	"in_rel",     "in_file",      "a/up",       "a/b/c/top",  "out_abs",    "out_rel",
	"a/b/out_deep", "chain1",     "inchain1",   "loop1",      "self",       "proc_root",
	"proc_cwd",   "proc_rel",     "abs_inside", "dangling_in", "dangling_out", "a/back_in",
	"dotdot_link", "dot_link",
};

static inline int oracle_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p) < 0 ? -1 : 0;
}

/* FTW_PHYS: symlinks are removed, never followed, so cleanup cannot reach
 * what the planted links point at. */
static inline void oracle_rm_tree(const char *path)
{
	if (path && path[0])
		nftw(path, oracle_rm_cb, 32, FTW_DEPTH | FTW_PHYS);
}

static inline void oracle_tree_destroy(oracle_tree *t)
{
	oracle_rm_tree(t->root);
	oracle_rm_tree(t->outside);
	t->root[0] = t->outside[0] = 0;
}

static inline int oracle_put(int dfd, const char *name, const char *text)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* 0 or -1 (errno set); on failure nothing is left behind. */
static inline int oracle_tree_create(oracle_tree *t, const char *tag)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->root, sizeof(t->root), "/tmp/airlock-%s-XXXXXX", tag);
	snprintf(t->outside, sizeof(t->outside), "/tmp/airlock-%s-out-XXXXXX", tag);
	if (!mkdtemp(t->root))
		return -1;
	if (!mkdtemp(t->outside)) {
		t->outside[0] = 0;
		goto fail;
	}
	if (!realpath(t->root, t->root_real))
		goto fail;

	int dfd = open(t->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		goto fail;
	char out_rel[PATH_MAX + 8], abs_inside[PATH_MAX + 8], long_name[256];
	const char *base = strrchr(t->outside, '/') + 1;
	snprintf(out_rel, sizeof(out_rel), "../%s", base);
	snprintf(abs_inside, sizeof(abs_inside), "%s/a", t->root_real);
	memset(long_name, 'L', 255);
	long_name[255] = 0;

	/* One call per statement: the order matters (parents first). */
	int ok = 0;
#define ORACLE_DO(x) ok |= ((x) != 0)
	ORACLE_DO(mkdirat(dfd, "a", 0755));
	ORACLE_DO(mkdirat(dfd, "a/b", 0755));
	ORACLE_DO(mkdirat(dfd, "a/b/c", 0755));
	ORACLE_DO(mkdirat(dfd, "d", 0755));
	ORACLE_DO(mkdirat(dfd, ".hidden", 0755));
	ORACLE_DO(mkdirat(dfd, "...", 0755));
	ORACLE_DO(mkdirat(dfd, long_name, 0755));
	ORACLE_DO(mkdirat(dfd, "%2e%2e", 0755));
	ORACLE_DO(mkdirat(dfd, "\xc0\xae", 0755));
	ORACLE_DO(oracle_put(dfd, "top.txt", "top\n"));
	ORACLE_DO(oracle_put(dfd, "a/file", "file\n"));
	ORACLE_DO(oracle_put(dfd, "a/b/file2", "file2\n"));
	ORACLE_DO(oracle_put(dfd, "back\\slash", "bs\n"));
	ORACLE_DO(mkfifoat(dfd, "fifo", 0644));
	ORACLE_DO(symlinkat("a/b", dfd, "in_rel"));
	ORACLE_DO(symlinkat("top.txt", dfd, "in_file"));
	ORACLE_DO(symlinkat("../d", dfd, "a/up"));
	ORACLE_DO(symlinkat("../../..", dfd, "a/b/c/top"));
	ORACLE_DO(symlinkat(t->outside, dfd, "out_abs"));
	ORACLE_DO(symlinkat(out_rel, dfd, "out_rel"));
	ORACLE_DO(symlinkat("../../../", dfd, "a/b/out_deep"));
	ORACLE_DO(symlinkat("chain2", dfd, "chain1"));
	ORACLE_DO(symlinkat("a/chain3", dfd, "chain2"));
	ORACLE_DO(symlinkat("../out_abs", dfd, "a/chain3"));
	ORACLE_DO(symlinkat("inchain2", dfd, "inchain1"));
	ORACLE_DO(symlinkat("a/inchain3", dfd, "inchain2"));
	ORACLE_DO(symlinkat("b/c", dfd, "a/inchain3"));
	ORACLE_DO(symlinkat("loop2", dfd, "loop1"));
	ORACLE_DO(symlinkat("loop1", dfd, "loop2"));
	ORACLE_DO(symlinkat("self", dfd, "self"));
	ORACLE_DO(symlinkat("/proc/self/root", dfd, "proc_root"));
	ORACLE_DO(symlinkat("/proc/self/cwd", dfd, "proc_cwd"));
	ORACLE_DO(symlinkat("../../../../../../../../../../../../proc/self/root", dfd, "proc_rel"));
	ORACLE_DO(symlinkat(abs_inside, dfd, "abs_inside"));
	ORACLE_DO(symlinkat("nonexistent/deeper", dfd, "dangling_in"));
	ORACLE_DO(symlinkat("/nonexistent-airlock-oracle/x", dfd, "dangling_out"));
	ORACLE_DO(symlinkat("../a/b", dfd, "a/back_in"));
	ORACLE_DO(symlinkat("..", dfd, "dotdot_link"));
	ORACLE_DO(symlinkat(".", dfd, "dot_link"));
#undef ORACLE_DO
	close(dfd);
	if (ok != 0)
		goto fail;

	int ofd = open(t->outside, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ofd < 0)
		goto fail;
	ok = oracle_put(ofd, "secret", "outside\n");
	close(ofd);
	if (ok != 0)
		goto fail;
	return 0;
fail:;
	int e = errno;
	oracle_tree_destroy(t);
	errno = e;
	return -1;
}

/* ---- the path grammar ----------------------------------------------------- */

/* A component drawn from the grammar; appends to out (capacity cap), returns
 * the new length. The 255/256-byte and long-result forms are produced by
 * oracle_generate directly. */
static inline size_t oracle_component(oracle_rng *r, unsigned char *out, size_t len, size_t cap)
{
	static const char *const plain[] = {
		"a", "b", "c", "d", "top.txt", "file", "file2", "fifo", "back\\slash", "new",
		"x", "a.txt", "a-b", "nonexistent",
	};
	static const char *const dots[] = {
		".", "..", "...", "....", ".hidden", "..a", "a..", ". ", " .", ".\t",
	};
	static const char *const encoded[] = {
		"%2e%2e", "%2e", "%2f", "..%2f..", "%2e%2e%2f", "%252e%252e", "%c0%ae", "%00",
		"\xc0\xae", "\xc0\xae\xc0\xae", "\xc0\xaf", "\xe0\x80\xae", "\xe0\x80\xae\xe0\x80\xae",
		"\xe0\x80\xaf", "\xf0\x80\x80\xae", "\xf0\x80\x80\xaf", "\xc1\x9c", "\xef\xbc\x8f",
		"\xe2\x80\xa4\xe2\x80\xa4", "\xef\xbc\x8e\xef\xbc\x8e", "\xc0\x2e", "\xff\xfe",
	};
	static const char *const backslash[] = {
		"\\", "..\\..", "a\\b", "\\\\server", "..\\", "\\..",
	};
	const char *pick = NULL;
	size_t plen = 0;
	unsigned char rnd[16];
	switch (oracle_below(r, 10)) {
	case 0:
	case 1:
	case 2:
		pick = plain[oracle_below(r, sizeof(plain) / sizeof(plain[0]))];
		break;
	case 3:
	case 4: {
		size_t n = sizeof(oracle_link_names) / sizeof(oracle_link_names[0]);
		pick = oracle_link_names[oracle_below(r, n)];
		break;
	}
	case 5:
	case 6:
		pick = dots[oracle_below(r, sizeof(dots) / sizeof(dots[0]))];
		break;
	case 7:
		pick = encoded[oracle_below(r, sizeof(encoded) / sizeof(encoded[0]))];
		break;
	case 8:
		pick = backslash[oracle_below(r, sizeof(backslash) / sizeof(backslash[0]))];
		break;
	default: /* random bytes, NUL and control bytes included */
		plen = 1 + oracle_below(r, sizeof(rnd));
		for (size_t i = 0; i < plen; i++) {
			uint64_t v = oracle_next(r);
			rnd[i] = (v & 0x300) ? (unsigned char)(v & 0xff)
			                     : (unsigned char)".\0/\\"[(v >> 16) & 3];
		}
		break;
	}
	if (pick)
		plen = strlen(pick);
	if (len + plen > cap)
		return len;
	memcpy(out + len, pick ? (const unsigned char *)pick : rnd, plen);
	return len + plen;
}

/*
 * One generated path into out (capacity cap >= 8192); returns its length.
 * The mix: separators (/, //, trailing /), dot segments, encodings, NUL,
 * absolute forms (including the tree's real path and /proc/self/root),
 * planted symlink names, 255/256-byte components and results around and
 * over 4096 bytes.
 */
static inline size_t oracle_generate(oracle_rng *r, const oracle_tree *t, unsigned char *out,
                                     size_t cap)
{
	size_t len = 0;
	cap -= 1;

	/* Absolute forms, ~8%. */
	switch (oracle_below(r, 50)) {
	case 0:
		out[len++] = '/';
		break;
	case 1:
		len += (size_t)snprintf((char *)out, cap, "//");
		break;
	case 2:
		len += (size_t)snprintf((char *)out, cap, "%s/", t->root_real);
		break;
	case 3:
		len += (size_t)snprintf((char *)out, cap, "/proc/self/root/");
		break;
	default:
		break;
	}

	unsigned shape = (unsigned)oracle_below(r, 100);
	if (shape < 4) {
		/* A result at or around the 4096-byte limit: "/workspace/" is 11, so
		 * an input of 4085 is the longest accepted. Repeated existing names
		 * keep part of it real. */
		static const size_t targets[] = { 4084, 4085, 4086, 4087, 4200, 8000 };
		size_t want = targets[oracle_below(r, 6)];
		if (want > cap)
			want = cap;
		const char *unit = oracle_below(r, 2) ? "a/b/c/top/" : "d/";
		size_t ulen = strlen(unit);
		while (len + ulen + 1 < want / 2) {
			memcpy(out + len, unit, ulen);
			len += ulen;
		}
		while (len < want) {
			size_t take = want - len;
			if (take > 200)
				take = 200;
			memset(out + len, 'n', take);
			len += take;
			if (len < want)
				out[len++] = '/';
		}
		/* Never end on a separator by accident. */
		if (out[len - 1] == '/')
			out[len - 1] = 'z';
		return len;
	}
	if (shape < 8) {
		/* A component of exactly 255 or 256 bytes, alone or nested; the
		 * existing 255-byte directory is named by 'L'. */
		if (oracle_below(r, 2)) {
			memcpy(out + len, "a/", 2);
			len += 2;
		}
		size_t n = 255 + oracle_below(r, 2);
		memset(out + len, oracle_below(r, 2) ? 'L' : 'q', n);
		len += n;
		if (oracle_below(r, 3) == 0) {
			memcpy(out + len, "/new", 4);
			len += 4;
		}
		return len;
	}

	size_t ncomp = 1 + oracle_below(r, 6);
	for (size_t i = 0; i < ncomp && len + 600 < cap; i++) {
		if (i > 0) {
			unsigned s = (unsigned)oracle_below(r, 20);
			if (s == 0)
				len += (size_t)snprintf((char *)out + len, cap - len, "//");
			else if (s == 1)
				out[len++] = '\\';
			else
				out[len++] = '/';
		}
		len = oracle_component(r, out, len, cap);
	}
	switch (oracle_below(r, 20)) {
	case 0:
		out[len++] = '/';
		break;
	case 1:
		len += (size_t)snprintf((char *)out + len, cap - len, "/.");
		break;
	case 2:
		len += (size_t)snprintf((char *)out + len, cap - len, "/..");
		break;
	case 3:
		out[len++] = 0;
		break;
	default:
		break;
	}
	return len;
}

#endif
