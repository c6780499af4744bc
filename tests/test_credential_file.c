/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service credential's file: each refusal names the file and the rule
 * and never a byte of the content; a good file gives exactly the token.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/credential_file.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/airlock-cred-XXXXXX");
	cr_assert(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

static const char *put(const char *name, const void *data, size_t len, mode_t mode)
{
	static char p[128];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
	cr_assert_eq(chmod(p, mode), 0);
	return p;
}

static void refused(const char *path, const char *why)
{
	unsigned char *tok = NULL;
	size_t len = 0;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_credential_file_read(path, &tok, &len, &err),
	             airlock_errcode(AIRLOCK_ERR_CONFIG), "%s should be refused", path);
	cr_assert(strstr(err.message, path), "names the file: %s", err.message);
	cr_assert(strstr(err.message, why), "says why (%s): %s", why, err.message);
	cr_assert_null(strstr(err.message, "s3cr3t"), "never a byte of the token: %s", err.message);
	cr_assert_null(tok);
}

TestSuite(credential_file, .init = setup, .fini = teardown);

Test(credential_file, a_good_file_gives_the_token_without_its_newline)
{
	const char *p = put("ok", "s3cr3t-0123456789abcdef\n", 24, 0600);
	unsigned char *tok = NULL;
	size_t len = 0;
	airlock_error err = { 0 };
	cr_assert_eq(airlock_credential_file_read(p, &tok, &len, &err), 0, "%s", err.message);
	cr_assert_eq(len, 23);
	cr_assert_eq(memcmp(tok, "s3cr3t-0123456789abcdef", 23), 0);
	free(tok);
	p = put("ro", "s3cr3t-0123456789abcdef", 23, 0400);
	cr_assert_eq(airlock_credential_file_read(p, &tok, &len, &err), 0, "%s", err.message);
	free(tok);
}

Test(credential_file, refusals_name_the_file_and_the_rule)
{
	refused(put("wide", "s3cr3t-0123456789abcdef", 23, 0644), "mode 0644");
	refused(put("group", "s3cr3t-0123456789abcdef", 23, 0640), "mode 0640");
	refused(put("short", "s3cr3t", 6, 0600), "under 16 bytes");
	refused(put("space", "s3cr3t 0123456789abcdef", 23, 0600), "printable ASCII");
	refused(put("twolines", "s3cr3t-0123456789\nabcdef", 24, 0600), "printable ASCII");
	refused(put("nul", "s3cr3t-0123456789\0abcdef", 24, 0600), "printable ASCII");
	static char big[5000];
	memset(big, 'a', sizeof(big));
	refused(put("big", big, sizeof(big), 0600), "over 4096 bytes");
	/* The cap is exact: 4096 bytes are read whole, one more is refused. */
	refused(put("cap1", big, 4097, 0600), "over 4096 bytes");
	airlock_error cerr = { 0 };
	char *text = NULL;
	size_t text_len = 0;
	cr_assert_eq(airlock_credential_file_read_text(put("cap", big, 4096, 0600), "test file", 4096,
	                                               &text, &text_len, &cerr),
	             0, "%s", cerr.message);
	cr_assert_eq(text_len, 4096);
	cr_assert_eq(text[4096], 0);
	free(text);
	char missing[128];
	snprintf(missing, sizeof(missing), "%s/none", dir);
	refused(missing, "No such file");
	refused(dir, "not a regular file");
	/* A FIFO at the path is refused at once, never waited on. */
	char fifo[128];
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	refused(fifo, "not a regular file");
	airlock_error err = { 0 };
	unsigned char *tok = NULL;
	size_t len = 0;
	cr_assert_eq(airlock_credential_file_read(NULL, &tok, &len, &err),
	             airlock_errcode(AIRLOCK_ERR_CONFIG));
	cr_assert(strstr(err.message, "--credential-file"), "%s", err.message);
}

Test(credential_file, another_owner_is_refused)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to chown");
	const char *p = put("other", "s3cr3t-0123456789abcdef", 23, 0600);
	cr_assert_eq(chown(p, 12345, 12345), 0);
	refused(p, "owned by uid 12345");
}
