/*
 * manifest.c - the list of files a cache entry must hold, with their
 * XXH3-128, kept beside the entry so that `stage --verify` can re-check it
 * without reading the source again.
 *
 * One line per regular file: "<32 hex> <size> <path>", the path with '\\'
 * and newline escaped as "\\\\" and "\\n".  Entries from foreign archives
 * and directories are written with the same format (see archive_unpack.c
 * and source_dir.c).
 */
#include "manifest.h"
#include "hash.h"
#include "ctx.h"
#include "trailer.h"
#include "fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* (A line is formatted here and written in a few pieces: with an fprintf
 * per byte, writing the manifest of 20,000 files was a visible part of a
 * cold stage, which writes it after the last file.) */
void stg__manifest_line(FILE *f, const uint8_t xxh3[16], uint64_t size, const char *path)
{
	char line[16 * 2 + 1 + 20 + 2];
	size_t n = stg__hex(xxh3, 16, line);
	n += (size_t)snprintf(line + n, sizeof line - n, " %llu ", (unsigned long long)size);
	fwrite(line, 1, n, f);
	stg__put_escaped(f, path);
	fputc('\n', f);
}

int stg__manifest_close(FILE *f)
{
	bool failed = ferror(f);
	if (fclose(f))
		return -1;
	if (failed) {
		errno = EIO;
		return -1;
	}
	return 0;
}

void stg__put_escaped(FILE *f, const char *path)
{
	for (const char *p = path;;) {
		size_t plain = strcspn(p, "\\\n");
		fwrite(p, 1, plain, f);
		p += plain;
		if (!*p)
			return;
		fputs(*p == '\\' ? "\\\\" : "\\n", f);
		p++;
	}
}

int stg__manifest_write(int dirfd, const stg_pack *p, const bool *sel)
{
	int fd = openat(dirfd, "manifest", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	                0400);
	if (fd < 0)
		return -1;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return -1;
	}
	char path[STG_PATH_MAX + 1];
	for (size_t i = 0; i < p->t.n_entries; i++) {
		const stg_rec *r = &p->t.recs[i];
		if (r->type == STG_FILE && (!sel || sel[i]))
			stg__manifest_line(f, r->xxh3, r->size, stg__rec_path(p, r, path));
	}
	return stg__manifest_close(f);
}

bool stg__unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (*r != '\\') {
			*w++ = *r;
			continue;
		}
		r++;
		if (*r == '\\')
			*w++ = '\\';
		else if (*r == 'n')
			*w++ = '\n';
		else
			return false;
	}
	*w = '\0';
	return true;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

/* Split a manifest line (without its newline) into its hash, size and
 * unescaped path (in place).  false if malformed. */
static bool parse_line(char *line, uint8_t xxh3[16], uint64_t *size, char **path)
{
	char *sp1 = strchr(line, ' ');
	char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || sp1 - line != 32)
		return false;
	*sp2 = '\0';
	char *end;
	errno = 0;
	*size = strtoull(sp1 + 1, &end, 10);
	if (errno || end != sp2 || end == sp1 + 1)
		return false;
	*path = sp2 + 1;
	if (!stg__unescape(*path) || !stg__path_ok(*path, strlen(*path)))
		return false;
	for (int i = 0; i < 16; i++) {
		int hi = hexval(line[2 * i]), lo = hexval(line[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		xxh3[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

int stg__manifest_check(stg_ctx *ctx, FILE *f, int datafd)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = 0;
	while ((len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		uint8_t want[16];
		uint64_t want_size;
		char *path;
		if (!parse_line(line, want, &want_size, &path)) {
			rc = -1;
			break;
		}
		uint8_t got[16];
		uint64_t size = 0;
		if (stg__hash_file(datafd, path, got, &size)) {
			stg__fail_errno(ctx, STG_ECORRUPT, errno, "'%s' is missing or unreadable",
			                path);
			rc = 1;
			break;
		}
		if (size != want_size || memcmp(got, want, 16)) {
			stg__fail(ctx, STG_ECORRUPT,
			          "'%s' does not match its manifest (%llu bytes, expected %llu)",
			          path, (unsigned long long)size, (unsigned long long)want_size);
			rc = 1;
			break;
		}
	}
	free(line);
	return rc;
}

/* Regular-file names beneath a directory, whatever its depth. */
static int count_entry(void *arg, int dirfd, const char *name, const struct stat *st)
{
	(void)dirfd;
	(void)name;
	if (S_ISREG(st->st_mode))
		(*(int64_t *)arg)++;
	return 1;
}

static int64_t count_files(int datafd)
{
	int64_t n = 0;
	stg_tvisit v = {.entry = count_entry, .arg = &n};
	return stg__tree_visit(datafd, ".", &v) ? -1 : n;
}

int stg__manifest_quick(stg_ctx *ctx, FILE *f, int datafd)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = 0;
	int64_t names = 0; /* the names the manifest's files have (hard links) */
	while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		uint8_t want[16];
		uint64_t want_size;
		char *path;
		struct stat st;
		if (!parse_line(line, want, &want_size, &path)) {
			rc = -1;
		} else if (fstatat(datafd, path, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno == ENOENT || errno == ENOTDIR)
				stg__fail(ctx, STG_ECORRUPT, "'%s' is missing", path);
			else
				stg__fail_errno(ctx, STG_ECORRUPT, errno, "cannot check '%s'",
				                path);
			rc = 1;
		} else if (!S_ISREG(st.st_mode)) {
			stg__fail(ctx, STG_ECORRUPT, "'%s' is no longer a file", path);
			rc = 1;
		} else if ((uint64_t)st.st_size != want_size) {
			stg__fail(ctx, STG_ECORRUPT, "'%s' has %llu bytes, its manifest says %llu",
			          path, (unsigned long long)st.st_size,
			          (unsigned long long)want_size);
			rc = 1;
		} else {
			names += (int64_t)st.st_nlink;
		}
	}
	free(line);
	if (rc)
		return rc;
	int64_t have = count_files(datafd);
	if (have < 0) {
		stg__fail_errno(ctx, STG_ECORRUPT, errno, "cannot read the entry's tree");
		return 1;
	}
	if (have > names) {
		stg__fail(ctx, STG_ECORRUPT, "it holds %lld file%s more than its manifest names",
		          (long long)(have - names), have - names == 1 ? "" : "s");
		return 1;
	}
	return 0;
}

void stg__manifest_free(stg_manifest *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->files[i].path);
	free(m->files);
	stg__strmap_free(&m->map);
	memset(m, 0, sizeof *m);
}

int stg__manifest_load(FILE *f, stg_manifest *m)
{
	memset(m, 0, sizeof *m);
	char *line = NULL;
	size_t cap = 0, fcap = 0;
	ssize_t len;
	int rc = 0;
	while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		stg_mfile mf;
		char *path;
		if (!parse_line(line, mf.xxh3, &mf.size, &path)) {
			errno = EINVAL;
			rc = -1;
		} else if (m->n == UINT32_MAX - 1) {
			errno = EFBIG;
			rc = -1;
		} else if (m->n == fcap) {
			fcap = fcap ? fcap * 2 : 256;
			stg_mfile *v = realloc(m->files, fcap * sizeof *v);
			if (!v)
				rc = -1;
			else
				m->files = v;
		}
		if (rc == 0 && !(mf.path = strdup(path)))
			rc = -1;
		if (rc == 0)
			m->files[m->n++] = mf;
	}
	free(line);
	if (rc == 0 && ferror(f)) {
		errno = EIO;
		rc = -1;
	}
	if (rc == 0 && stg__strmap_init(&m->map, m->n))
		rc = -1;
	for (size_t i = 0; rc == 0 && i < m->n; i++) {
		const char *p = m->files[i].path;
		if (stg__strmap_put(&m->map, p, strlen(p), (uint32_t)i) < 0)
			rc = -1;
	}
	if (rc) {
		int e = errno;
		stg__manifest_free(m);
		errno = e;
	}
	return rc;
}
