/*
 * kept_note.c - kept results announced where their user looks: a note in
 * the user's home (on the shared filesystem), one per kept result, so that
 * `stager status` on a login node says which nodes hold results and how to
 * bring them back, without the user knowing the node.
 *
 *   ~/.local/state/stager/kept/NODE.NAME   "stager-kept 1", then lines
 *                                          node, job, path, dest, bytes, since
 *
 * A note is written when results are kept (stg_keep_results) and removed
 * with them (sent by `collect --kept`, or removed by clean).  The home is
 * $HOME, else the user's from the password database (slurmd gives the
 * epilog no HOME; runuser sets it).  Notes are the user's own files; they are read
 * with a size limit all the same, and a malformed one is skipped.
 */
#include "kept_note.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NOTE_MAGIC "stager-kept 1"
#define NOTE_MAX   (64 * 1024)
#define NOTES_MAX  10000

/* The notes' directory; -1 if the user has no home. */
static int notes_dir(char *out, size_t len)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	const char *home = getenv("HOME");
	if (!home || home[0] != '/') {
		if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &res) || !res || !res->pw_dir ||
		    res->pw_dir[0] != '/')
			return -1;
		home = res->pw_dir;
	}
	int n = snprintf(out, len, "%s/.local/state/stager/kept", strcmp(home, "/") ? home : "");
	return n > 0 && (size_t)n < len ? 0 : -1;
}

/* NODE.NAME: neither may hold a slash or start with a dot. */
static bool note_name(char *out, size_t len, const char *node, const char *name)
{
	if (!*node || !*name || node[0] == '.' || name[0] == '.' || strchr(node, '/') ||
	    strchr(name, '/'))
		return false;
	int n = snprintf(out, len, "%s.%s", node, name);
	return n > 0 && (size_t)n < len;
}

void stg__kept_note_write(stg_ctx *ctx, const char *name, const char *path, const char *dest,
                          uint64_t bytes)
{
	char dir[STG_PATH_MAX], node[72], file[400], full[STG_PATH_MAX + 400];
	stg_node_name(node, sizeof node);
	if (notes_dir(dir, sizeof dir) || !note_name(file, sizeof file, node, name))
		return;
	char job[64] = "";
	if (!strncmp(name, "job", 3))
		sscanf(name + 3, "%63[0-9]", job);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return;
	fprintf(f, "%s\nnode %s\njob %s\npath ", NOTE_MAGIC, node, job);
	stg__put_escaped(f, path);
	fputs("\ndest ", f);
	stg__put_escaped(f, dest ? dest : "");
	fprintf(f, "\nbytes %llu\nsince %lld\n", (unsigned long long)bytes, (long long)time(NULL));
	if (fclose(f) || !text) {
		free(text);
		return;
	}
	snprintf(full, sizeof full, "%s/%s", dir, file);
	char tmp[sizeof full + 16];
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", full, (int)getpid());
	int fd = -1;
	if (stg__mkdirs(dir, 0700) == 0)
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	bool ok = fd >= 0 && write(fd, text, len) == (ssize_t)len;
	if (fd >= 0 && close(fd))
		ok = false;
	if (!ok || rename(tmp, full)) {
		if (fd >= 0)
			unlink(tmp);
		stg__log(ctx, STG_LOG_WARN, "cannot leave a note of kept results in '%s': %s", dir,
		         strerror(errno));
	}
	free(text);
}

void stg__kept_note_drop(const char *name)
{
	char dir[STG_PATH_MAX], node[72], file[400], full[STG_PATH_MAX + 400];
	stg_node_name(node, sizeof node);
	if (notes_dir(dir, sizeof dir) || !note_name(file, sizeof file, node, name))
		return;
	snprintf(full, sizeof full, "%s/%s", dir, file);
	unlink(full);
}

static void note_clear(stg_kept_note *e)
{
	free(e->node);
	free(e->job);
	free(e->path);
	free(e->dest);
	memset(e, 0, sizeof *e);
}

void stg_kept_notes_free(stg_kept_note *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		note_clear(&v[i]);
	free(v);
}

/* One note, parsed; false if it is not one. */
static bool read_note(int dirfd, const char *name, stg_kept_note *e)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	char *text = NULL;
	bool ok = false;
	if (fd < 0)
		return false;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > NOTE_MAX ||
	    !(text = calloc(1, (size_t)st.st_size + 1)) ||
	    read(fd, text, (size_t)st.st_size) != st.st_size)
		goto out;
	char *save = NULL, *line = strtok_r(text, "\n", &save);
	if (!line || strcmp(line, NOTE_MAGIC))
		goto out;
	while ((line = strtok_r(NULL, "\n", &save))) {
		char *sp = strchr(line, ' ');
		if (!sp)
			continue;
		*sp++ = '\0';
		char **field = !strcmp(line, "node")   ? &e->node
		               : !strcmp(line, "job")  ? &e->job
		               : !strcmp(line, "path") ? &e->path
		               : !strcmp(line, "dest") ? &e->dest
		                                       : NULL;
		if (field && !*field && stg__unescape(sp))
			*field = strdup(sp);
		else if (!strcmp(line, "bytes"))
			e->bytes = strtoull(sp, NULL, 10);
		else if (!strcmp(line, "since"))
			e->since = strtoll(sp, NULL, 10);
	}
	/* the node and job go into a command the user is told to run: a
	 * host's name and a job's number, nothing else (no shell's words) */
	ok = e->node && e->path && e->job && e->dest && *e->node && e->node[0] != '-' &&
	     strspn(e->node, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") ==
	             strlen(e->node) &&
	     strspn(e->job, "0123456789") == strlen(e->job);
out:
	free(text);
	close(fd);
	return ok;
}

stg_err stg_kept_notes(stg_ctx *ctx, stg_kept_note **out, size_t *count)
{
	*out = NULL;
	*count = 0;
	char dir[STG_PATH_MAX], **names;
	size_t n;
	if (notes_dir(dir, sizeof dir))
		return STG_OK;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return STG_OK; /* no notes */
	if (stg__dir_names(dfd, ".", true, &names, &n)) {
		close(dfd);
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot list '%s'", dir);
	}
	size_t m = n > NOTES_MAX ? NOTES_MAX : n;
	stg_kept_note *v = calloc(m ? m : 1, sizeof *v);
	size_t k = 0;
	for (size_t i = 0; v && i < m; i++) {
		if (names[i][0] == '.' || strstr(names[i], ".tmp."))
			continue;
		if (read_note(dfd, names[i], &v[k]))
			k++;
		else
			note_clear(&v[k]);
	}
	stg__names_free(names, n);
	close(dfd);
	if (!v)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	*out = v;
	*count = k;
	return STG_OK;
}

stg_err stg_kept_notes_elsewhere(stg_ctx *ctx, const char *job, stg_kept_note **out, size_t *count)
{
	stg_err err = stg_kept_notes(ctx, out, count);
	if (err)
		return err;
	char me[72];
	stg_node_name(me, sizeof me);
	size_t k = 0;
	for (size_t i = 0; i < *count; i++) {
		stg_kept_note *e = &(*out)[i];
		if (!strcmp(e->node, me) || (job && strcmp(e->job, job))) {
			note_clear(e);
			continue;
		}
		(*out)[k++] = *e;
	}
	*count = k;
	return STG_OK;
}
