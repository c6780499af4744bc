/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays a fuzz target's kept corpus as a regression test: every file in the
 * directory given as argv[1] is fed to LLVMFuzzerTestOneInput once. A crash
 * or sanitizer report fails the test; an empty or missing corpus fails too,
 * so a corpus cannot silently disappear.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REGRESS_INPUT_MAX (1u << 20)

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	int dfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 1;
	}
	size_t count = 0;
	unsigned char *buf = malloc(REGRESS_INPUT_MAX);
	if (!buf)
		return 1;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		int fd = openat(dfd, de->d_name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct stat st;
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			continue;
		}
		size_t len = 0;
		ssize_t n;
		while (len < REGRESS_INPUT_MAX &&
		       (n = read(fd, buf + len, REGRESS_INPUT_MAX - len)) > 0)
			len += (size_t)n;
		close(fd);
		/* A fresh copy per input so an overread past len is caught by ASan. */
		unsigned char *copy = malloc(len ? len : 1);
		if (!copy)
			return 1;
		memcpy(copy, buf, len);
		LLVMFuzzerTestOneInput(copy, len);
		free(copy);
		count++;
	}
	closedir(d);
	free(buf);
	printf("%zu corpus inputs replayed from %s\n", count, argv[1]);
	return count > 0 ? 0 : 1;
}
