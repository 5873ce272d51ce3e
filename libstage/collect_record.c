/*
 * collect_record.c - collect's record on scratch: what DEST holds from
 * SRC (size, times, inode, XXH3 of each file) and the temporaries a
 * collect has out; loaded, appended to as files land, and compacted.
 */
#include "collect_record.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"
#include "manifest.h"

#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* ---- the record ----------------------------------------------------------------- */

static void strip_slashes(char *p)
{
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
}

int stg__col_names(const char *src, const char *dest, bool pack, char asrc[STG_PATH_MAX + 1],
                   char adest[STG_PATH_MAX + 1], char id[17])
{
	if (stg__absolute(src, asrc, STG_PATH_MAX + 1) ||
	    stg__absolute(dest, adest, STG_PATH_MAX + 1))
		return -1;
	strip_slashes(asrc);
	strip_slashes(adest);
	size_t dl = strlen(adest);
	if (pack && (dl < 8 || strcmp(adest + dl - 8, ".tar.zst")) && dl + 8 < STG_PATH_MAX + 1)
		strcat(adest, ".tar.zst");
	/* the record's name: XXH3 of what it is about */
	char key[2 * (STG_PATH_MAX + 1) + 8];
	int kl = snprintf(key, sizeof key, "%s%c%s%c%s", asrc, 0, adest, 0, pack ? "pack" : "tree");
	snprintf(id, 17, "%016llx", (unsigned long long)XXH3_64bits(key, (size_t)kl));
	return 0;
}

int stg__collect_record_move(stg_cache *c, const char *src, const char *dest, bool pack,
                             const char *to)
{
	char asrc[STG_PATH_MAX + 1], ato[STG_PATH_MAX + 1], adest[STG_PATH_MAX + 1];
	char id[17], nid[17], rel[64], nrel[64], ntmp[80];
	if (stg__col_names(src, dest, pack, asrc, adest, id) ||
	    stg__col_names(to, dest, pack, ato, adest, nid))
		return -1;
	snprintf(rel, sizeof rel, "collect/%s", id);
	snprintf(nrel, sizeof nrel, "collect/%s", nid);
	snprintf(ntmp, sizeof ntmp, "collect/%s.tmp", nid);
	int fd = openat(c->rootfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	FILE *in = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!in) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int ofd = openat(c->rootfd, ntmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	                 0600);
	FILE *out = ofd >= 0 ? fdopen(ofd, "w") : NULL;
	if (!out) {
		if (ofd >= 0)
			close(ofd);
		fclose(in);
		return -1;
	}
	/* the same lines, the source's ("S ") now the new place */
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, in)) > 0) {
		if (!strncmp(line, "S ", 2)) {
			fputs("S ", out);
			stg__put_escaped(out, ato);
			fputc('\n', out);
		} else {
			fwrite(line, 1, (size_t)len, out);
		}
	}
	free(line);
	fclose(in);
	int rc = fflush(out) || fsync(fileno(out)) ? -1 : 0;
	if (fclose(out))
		rc = -1;
	if (rc || renameat(c->rootfd, ntmp, c->rootfd, nrel)) {
		unlinkat(c->rootfd, ntmp, 0);
		return -1;
	}
	unlinkat(c->rootfd, rel, 0);
	return 0;
}

crec *stg__col_rec_find(collector *k, const char *path)
{
	uint32_t i = stg__strmap_get(&k->map, path, strlen(path));
	return i == UINT32_MAX ? NULL : &k->recs[i];
}

/* Insert or replace the record of r->path (which is taken over, or freed
 * if the path has a record already); the stored record, NULL if out of
 * memory. */
crec *stg__col_rec_set(collector *k, crec *r)
{
	crec *old = stg__col_rec_find(k, r->path);
	if (old) {
		char *keep = old->path; /* the map's key */
		free(r->path);
		*old = *r;
		old->path = keep;
		return old;
	}
	if (k->n_recs == k->cap_recs) {
		size_t ncap = k->cap_recs ? k->cap_recs * 2 : 256;
		crec *nv = realloc(k->recs, ncap * sizeof *nv);
		if (!nv) {
			free(r->path);
			return NULL;
		}
		k->recs = nv;
		k->cap_recs = ncap;
	}
	if (stg__strmap_put(&k->map, r->path, strlen(r->path), (uint32_t)k->n_recs) < 0) {
		free(r->path);
		return NULL;
	}
	k->recs[k->n_recs] = *r;
	return &k->recs[k->n_recs++];
}

void stg__col_recs_clear(collector *k)
{
	for (size_t i = 0; i < k->n_recs; i++)
		free(k->recs[i].path);
	k->n_recs = 0;
	stg__strmap_free(&k->map);
	stg__strmap_init(&k->map, 1024);
}

/* Compose a line (the path escaped, last) and append it with one write. */
int stg__col_log_line(collector *k, const char *head, const char *path)
{
	char buf[STG_PATH_MAX * 2 + 256];
	FILE *f = fmemopen(buf, sizeof buf, "w");
	if (!f)
		return -1;
	fputs(head, f);
	if (path)
		stg__put_escaped(f, path);
	fputc('\n', f);
	long len = ftell(f);
	fclose(f);
	if (len <= 0 || (size_t)len >= sizeof buf)
		return -1;
	k->log_lines++;
	return stg__write_full(k->logfd, buf, (size_t)len);
}

int stg__col_log_rec(collector *k, const crec *r)
{
	char head[256];
	if (r->type == 'f') {
		char hex[33];
		for (int i = 0; i < 16; i++)
			snprintf(hex + 2 * i, 3, "%02x", r->xxh3[i]);
		snprintf(head, sizeof head, "f %llu %lld %lld %llu %o %s ",
		         (unsigned long long)r->size, (long long)r->mtime_ns,
		         (long long)r->ctime_ns, (unsigned long long)r->ino, r->mode, hex);
	} else if (r->type == 'l') {
		snprintf(head, sizeof head, "l %lld %lld %llu ", (long long)r->mtime_ns,
		         (long long)r->ctime_ns, (unsigned long long)r->ino);
	} else {
		snprintf(head, sizeof head, "d ");
	}
	return stg__col_log_line(k, head, r->path);
}

static void pending_drop(collector *k, const char *tmp)
{
	for (size_t i = 0; i < k->n_pending; i++) {
		if (!strcmp(k->pending[i], tmp)) {
			free(k->pending[i]);
			k->pending[i] = k->pending[--k->n_pending];
			return;
		}
	}
}

static int pending_add(collector *k, const char *tmp)
{
	char **nv = realloc(k->pending, (k->n_pending + 1) * sizeof *nv);
	if (!nv)
		return -1;
	k->pending = nv;
	if (!(nv[k->n_pending] = strdup(tmp)))
		return -1;
	k->n_pending++;
	return 0;
}

/* Parse one record line; false if malformed (the rest is ignored). */
static bool parse_line(collector *k, char *line)
{
	char type = line[0];
	if (!type || line[1] != ' ')
		return false;
	char *p = line + 2;
	crec r = {.type = type};
	if (type == 't' || type == 'x') {
		if (!stg__unescape(p))
			return false;
		if (type == 'x')
			pending_drop(k, p);
		else if (pending_add(k, p))
			return false;
		return true;
	}
	if (type == 'D') {
		unsigned long long dev, ino;
		if (sscanf(p, "%llu %llu", &dev, &ino) != 2)
			return false;
		k->dest_dev = dev;
		k->dest_ino = ino;
		return true;
	}
	int used = 0;
	if (type == 'f') {
		unsigned long long size, ino;
		long long mt, ct;
		char hex[33];
		if (sscanf(p, "%llu %lld %lld %llu %o %32s %n", &size, &mt, &ct, &ino, &r.mode, hex,
		           &used) != 6 ||
		    strlen(hex) != 32)
			return false;
		r.size = size;
		r.ino = ino;
		r.mtime_ns = mt;
		r.ctime_ns = ct;
		for (int i = 0; i < 16; i++)
			sscanf(hex + 2 * i, "%2hhx", &r.xxh3[i]);
	} else if (type == 'l') {
		unsigned long long ino;
		long long mt, ct;
		if (sscanf(p, "%lld %lld %llu %n", &mt, &ct, &ino, &used) != 3)
			return false;
		r.ino = ino;
		r.mtime_ns = mt;
		r.ctime_ns = ct;
	} else if (type != 'd') {
		return false;
	}
	p += used;
	if (!stg__unescape(p) || !stg__path_ok(p, strlen(p)) || !(r.path = strdup(p)))
		return false;
	return stg__col_rec_set(k, &r) != NULL;
}

/* Open (creating) the record and read what it says. */
stg_err stg__col_record_open(collector *k)
{
	stg_ctx *ctx = k->ctx;
	if (mkdirat(k->c->rootfd, "collect", 0700) && errno != EEXIST)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot create '%s/collect'",
		                       k->c->root);
	char rel[64];
	snprintf(rel, sizeof rel, "collect/%s", k->id);
	k->logfd = openat(k->c->rootfd, rel, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
	                  0600);
	if (k->logfd < 0)
		return stg__fail_errno(ctx, STG_EIO, errno,
		                       "cannot open the collect record '%s/%s'", k->c->root, rel);
	int fd = dup(k->logfd);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot read the collect record");
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	bool first = true;
	while ((len = getline(&line, &cap, f)) > 0) {
		/* a torn last line, a line that is not ours: keep what came
		 * before and rewrite the record */
		if (line[len - 1] != '\n') {
			k->rewrite = true;
			break;
		}
		line[len - 1] = '\0';
		if (first) {
			first = false;
			if (strcmp(line, "stager-collect 1")) {
				k->rewrite = true;
				break;
			}
			k->log_lines++;
			continue;
		}
		k->log_lines++;
		if (line[0] == 'S')
			continue; /* the source, for clean */
		if (line[0] == 'P' && line[1] == ' ') {
			/* where temporaries go, for clean */
			if (stg__unescape(line + 2))
				snprintf(k->where, sizeof k->where, "%s", line + 2);
			continue;
		}
		if (!parse_line(k, line)) {
			k->rewrite = true;
			break;
		}
	}
	free(line);
	fclose(f);
	if (k->rewrite)
		stg__col_record_compact(k);
	return STG_OK;
}

/* Rewrite the record with only what is current (atomically). */
void stg__col_record_compact(collector *k)
{
	char rel[64], tmp[80];
	snprintf(rel, sizeof rel, "collect/%s", k->id);
	snprintf(tmp, sizeof tmp, "collect/%s.tmp", k->id);
	int fd = openat(k->c->rootfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	                0600);
	if (fd < 0)
		return;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return;
	}
	fprintf(f, "stager-collect 1\nS ");
	stg__put_escaped(f, k->src);
	fprintf(f, "\nD %llu %llu\n", (unsigned long long)k->dest_dev,
	        (unsigned long long)k->dest_ino);
	if (k->where[0]) {
		fputs("P ", f);
		stg__put_escaped(f, k->where);
		fputc('\n', f);
	}
	int oldfd = k->logfd;
	k->logfd = fileno(f);
	size_t lines = 2;
	for (size_t i = 0; i < k->n_recs; i++) {
		fflush(f);
		stg__col_log_rec(k, &k->recs[i]);
		lines++;
	}
	for (size_t i = 0; i < k->n_pending; i++) {
		fflush(f);
		stg__col_log_line(k, "t ", k->pending[i]);
		lines++;
	}
	k->logfd = oldfd;
	if (fclose(f) == 0 && renameat(k->c->rootfd, tmp, k->c->rootfd, rel) == 0) {
		k->log_lines = lines;
		k->rewrite = false;
		int nfd = openat(k->c->rootfd, rel, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
		if (nfd >= 0) {
			close(k->logfd);
			k->logfd = nfd;
		}
	} else {
		unlinkat(k->c->rootfd, tmp, 0);
	}
}
