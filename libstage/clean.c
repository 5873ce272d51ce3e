/*
 * clean.c - what is in the cache (status) and removing what nobody needs
 * (clean).
 *
 * clean removes, in order: builds whose builder is gone (its lock is free),
 * evictions that were interrupted, pins of owners that are gone (a finished
 * Slurm job, a dead process), job directories of such owners, and then
 * entries: all unpinned ones (--all), those unused for a while
 * (--older-than), and least recently used ones until the quotas hold; last
 * the lock files nobody holds.  An entry pinned by a live owner is never
 * removed.  Everything happens relative to the scratch root's descriptor,
 * never through a symlink.
 */
#include "collect.h"
#include "collect_record.h"
#include "mount_list.h"
#include "results.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"
#include "manifest.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void stg_clean_opts_init(stg_clean_opts *o)
{
	memset(o, 0, sizeof *o);
}

typedef struct cl_run {
	stg_ctx *ctx;
	stg_cache *c;
	const stg_clean_opts *o;
	stg_clean_fn report;
	void *arg;
	uint64_t freed;
	stg_owner_cache oc;
	unsigned keep_failed; /* results that could not be moved to kept/ */
} cl_run;

static void removed(cl_run *r, const char *what, const char *rel, uint64_t bytes)
{
	char path[STG_PATH_MAX * 2];
	snprintf(path, sizeof path, "%s/%s", r->c->root, rel);
	r->freed += bytes;
	if (r->report)
		r->report(r->arg, what, path, bytes);
}

/* Remove rel (under the root) unless this is a dry run. */
static void drop(cl_run *r, const char *what, const char *rel)
{
	uint64_t bytes = stg__tree_bytes(r->c->rootfd, rel);
	if (!r->o->dry_run && stg__rmtree_at(r->c->rootfd, rel)) {
		stg__log(r->ctx, STG_LOG_WARN, "cannot remove '%s/%s': %s", r->c->root, rel,
		         strerror(errno));
		return;
	}
	removed(r, what, rel, bytes);
}

static bool owner_gone(cl_run *r, const char *owner)
{
	if (r->o->job) {
		char mine[160];
		snprintf(mine, sizeof mine, "job-%s", r->o->job);
		if (!strcmp(owner, mine))
			return true;
	}
	return !stg__owner_alive(&r->oc, owner);
}

/* Names in a directory under the root. */
static size_t list_dir(stg_cache *c, const char *rel, char ***out)
{
	size_t n;
	return stg__dir_names(c->rootfd, rel, false, out, &n) ? 0 : n;
}

static void free_list(char **v, size_t n)
{
	stg__names_free(v, n);
}

static void clean_partials(cl_run *r)
{
	char **v;
	size_t n = list_dir(r->c, "cache", &v);
	for (size_t i = 0; i < n; i++) {
		char *tmp = strstr(v[i], ".tmp."), *old = strstr(v[i], ".old.");
		char rel[STG_PATH_MAX];
		snprintf(rel, sizeof rel, "cache/%s", v[i]);
		if (old) {
			drop(r, "partial", rel);
			continue;
		}
		if (!tmp)
			continue;
		/* its builder holds locks/<key> while it lives */
		char lname[STG_PATH_MAX];
		snprintf(lname, sizeof lname, "%.*s", (int)(tmp - v[i]), v[i]);
		int lk = stg__cache_lock(r->ctx, r->c, lname, false, NULL);
		if (lk < 0)
			continue;
		drop(r, "partial", rel);
		stg__cache_unlock(lk);
	}
	free_list(v, n);
}

static void clean_pins(cl_run *r)
{
	char **keys;
	size_t nk = list_dir(r->c, "pins", &keys);
	for (size_t i = 0; i < nk; i++) {
		char rel[STG_PATH_MAX];
		snprintf(rel, sizeof rel, "pins/%s", keys[i]);
		char **owners;
		size_t no = list_dir(r->c, rel, &owners);
		size_t left = no;
		for (size_t j = 0; j < no; j++) {
			if (!owner_gone(r, owners[j]))
				continue;
			char pin[STG_PATH_MAX];
			snprintf(pin, sizeof pin, "pins/%s/%s", keys[i], owners[j]);
			if (r->o->dry_run || unlinkat(r->c->rootfd, pin, 0) == 0) {
				removed(r, "pin", pin, 0);
				left--;
			}
		}
		if (!left && !r->o->dry_run)
			unlinkat(r->c->rootfd, rel, AT_REMOVEDIR);
		free_list(owners, no);
	}
	free_list(keys, nk);
}

/* dir/<owner> of owners that are gone: job directories (jobs/), and the
 * copies of packs that stage --all-nodes fans out (bcast/). */
static void clean_owned(cl_run *r, const char *dir, const char *what)
{
	char **v;
	size_t n = list_dir(r->c, dir, &v);
	for (size_t i = 0; i < n; i++) {
		if (!owner_gone(r, v[i]))
			continue;
		char rel[STG_PATH_MAX];
		struct stat st;
		snprintf(rel, sizeof rel, "results/%s", v[i]);
		if (!r->o->dry_run && fstatat(r->c->rootfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0)
			continue; /* results that could not be kept: never removed */
		snprintf(rel, sizeof rel, "%s/%s", dir, v[i]);
		drop(r, what, rel);
	}
	free_list(v, n);
}

/* The source a collect record is about (its "S" line); false if unknown. */
static bool record_source(cl_run *r, const char *rel, char *src, size_t len)
{
	int fd = openat(r->c->rootfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	bool found = false;
	for (int i = 0; i < 3 && (n = getline(&line, &cap, f)) > 0; i++) {
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		if (line[0] == 'S' && line[1] == ' ' && stg__unescape(line + 2) &&
		    (size_t)n < len) {
			snprintf(src, len, "%s", line + 2);
			found = true;
			break;
		}
	}
	free(line);
	fclose(f);
	return found;
}

/* Remove the temporaries that a killed collect left in its DEST (the
 * record's "t" lines without an "x"), before its record goes: nothing else
 * would.  Only names that collect makes (.stager-tmp.*, and its marker
 * .stager-collecting.* at the top), beneath the
 * directory the record names; never through a symbolic link. */
static void drop_temporaries(cl_run *r, const char *rel)
{
	int fd = openat(r->c->rootfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	char *line = NULL, where[STG_PATH_MAX + 1] = "";
	size_t cap = 0, n = 0, room = 0;
	char **pend = NULL;
	ssize_t len;
	while ((len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] != '\n')
			break;
		line[--len] = '\0';
		if (len < 2 || line[1] != ' ' || !strchr("Ptx", line[0]) ||
		    !stg__unescape(line + 2))
			continue;
		if (line[0] == 'P') {
			snprintf(where, sizeof where, "%s", line + 2);
		} else if (line[0] == 'x') {
			for (size_t i = 0; i < n; i++)
				if (!strcmp(pend[i], line + 2)) {
					free(pend[i]);
					pend[i] = pend[--n];
					break;
				}
		} else {
			if (n == room) {
				size_t nr = room ? 2 * room : 8;
				char **nv = realloc(pend, nr * sizeof *nv);
				if (!nv)
					break;
				pend = nv;
				room = nr;
			}
			if (!(pend[n] = strdup(line + 2)))
				break;
			n++;
		}
	}
	free(line);
	fclose(f);
	int dfd = where[0] == '/' && n ? open(where, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	for (size_t i = 0; i < n; i++) {
		const char *t = pend[i], *slash = strrchr(t, '/');
		const char *base = slash ? slash + 1 : t;
		struct stat st;
		bool tmp = !strncmp(base, ".stager-tmp.", 12);
		bool ours = tmp || (!slash && !strncmp(base, ".stager-collecting.", 19));
		if (dfd < 0 || !ours || t[0] == '/' || strstr(t, ".."))
			goto next;
		char dir[STG_PATH_MAX + 1];
		snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - t) : 1, slash ? t : ".");
		int pfd = slash ? stg__open_beneath(dfd, dir, O_RDONLY | O_DIRECTORY, 0) : dup(dfd);
		if (pfd < 0)
			goto next;
		if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			char shown[STG_PATH_MAX * 2 + 2];
			snprintf(shown, sizeof shown, "%s/%s", where, t);
			if (!r->o->dry_run && unlinkat(pfd, base, 0))
				stg__log(r->ctx, STG_LOG_WARN, "cannot remove '%s': %s", shown,
				         strerror(errno));
			else if (r->report && tmp) /* the marker is empty */
				r->report(r->arg, "leftover", shown,
				          S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0);
		}
		close(pfd);
	next:
		free(pend[i]);
	}
	if (dfd >= 0)
		close(dfd);
	free(pend);
}

/* Whether name is a temporary in kept/ (".NAME.copy.PID", ".NAME.to.tmp.PID":
 * results.c) whose process is gone. */
static bool copy_left(const char *name)
{
	const char *dot = strrchr(name, '.');
	char *end;
	if (name[0] != '.' || !dot ||
	    !((dot - name >= 5 && !strncmp(dot - 5, ".copy", 5)) ||
	      (dot - name >= 4 && !strncmp(dot - 4, ".tmp", 4))))
		return false;
	long pid = strtol(dot + 1, &end, 10);
	return end != dot + 1 && !*end && pid > 0 && kill((pid_t)pid, 0) && errno == ESRCH;
}

/* Kept results (results.c) once they are keep_days old (0: never), or all
 * of them with opts->kept; .to files whose results are gone; and copies
 * to kept/ that a killed clean left. */
static void clean_kept(cl_run *r)
{
	char **v;
	size_t n = list_dir(r->c, "kept", &v);
	time_t now = time(NULL);
	for (size_t i = 0; i < n; i++) {
		char rel[STG_PATH_MAX];
		snprintf(rel, sizeof rel, "kept/%s", v[i]);
		size_t len = strlen(v[i]);
		if (copy_left(v[i])) {
			drop(r, "partial", rel);
			continue;
		}
		if (v[i][0] == '.')
			continue;
		if (len > 3 && !strcmp(v[i] + len - 3, ".to")) {
			struct stat st;
			char data[STG_PATH_MAX];
			snprintf(data, sizeof data, "kept/%.*s", (int)(len - 3), v[i]);
			if (fstatat(r->c->rootfd, data, &st, AT_SYMLINK_NOFOLLOW) &&
			    errno == ENOENT && !r->o->dry_run)
				unlinkat(r->c->rootfd, rel, 0);
			continue;
		}
		int64_t when = stg__kept_epoch(v[i]);
		unsigned days = r->c->keep_days;
		if (!when)
			continue;
		uint64_t bytes = stg__tree_bytes(r->c->rootfd, rel);
		if (!r->o->kept && (!days || now - when < (time_t)days * 86400)) {
			/* what stays is said too: clean never hides results */
			if (r->report) {
				char shown[STG_PATH_MAX * 2 + 2];
				snprintf(shown, sizeof shown, "%s/%s", r->c->root, rel);
				r->report(r->arg, "stays", shown, bytes);
			}
			continue;
		}
		if (!r->o->dry_run && stg__kept_remove(r->c, v[i])) {
			stg__log(r->ctx, STG_LOG_WARN, "cannot remove '%s/%s': %s", r->c->root, rel,
			         strerror(errno));
			continue;
		}
		removed(r, "kept", rel, bytes);
	}
	free_list(v, n);
}

/* Results that jobs which are gone never fully collected: each SRC of
 * their records (results/<owner>) that is still there goes to kept/,
 * before their job directories are removed.  A record goes once nothing
 * of it is left to keep. */
typedef struct keep_run {
	cl_run *r;
	const char *owner;
	int failed;
} keep_run;

static int keep_one(void *arg, const char *src, const char *dest, bool pack)
{
	keep_run *k = arg;
	cl_run *r = k->r;
	struct stat st;
	if (src[0] != '/' || lstat(src, &st) || !S_ISDIR(st.st_mode))
		return 0; /* collected and removed, or never made */
	/* all of it reached DEST (the collects' record says so, from local
	 * stats alone): nothing to keep */
	if (stg__collect_whole(r->ctx, r->c, src, dest, pack) == 1) {
		stg__log(r->ctx, STG_LOG_DEBUG, "'%s' was collected whole to '%s'", src, dest);
		return 0;
	}
	/* on the shared filesystem it outlives the job where it is */
	char fstype[32];
	if (stg__dev_is_network(st.st_dev, fstype, sizeof fstype)) {
		stg__log(
		        r->ctx, STG_LOG_WARN,
		        "results in '%s' were never fully collected to '%s'; they stay there (%s): "
		        "`stager collect %s %s` sends the rest",
		        src, dest, fstype, src, dest);
		return 0;
	}
	/* "job-42" + "out" -> "job42-out", as stager run names what it keeps */
	const char *base = strrchr(src, '/') + 1;
	char name[256];
	if (!strncmp(k->owner, "job-", 4))
		snprintf(name, sizeof name, "job%.100s-%.100s", k->owner + 4,
		         *base ? base : "results");
	else
		snprintf(name, sizeof name, "%.100s-%.100s", k->owner, *base ? base : "results");
	uint64_t bytes = stg__tree_bytes(AT_FDCWD, src);
	if (r->o->dry_run) {
		if (r->report)
			r->report(r->arg, "keep", src, bytes);
		return 0;
	}
	char *kept = NULL;
	if (stg_keep_results(r->ctx, r->c, src, name, dest, &kept)) {
		stg__log(r->ctx, STG_LOG_WARN,
		         "results in '%s' were not collected and cannot be kept: %s", src,
		         stg_errmsg(r->ctx));
		k->failed++;
		r->keep_failed++;
		return 0;
	}
	/* what a killed collect left in DEST goes; what the collects sent is
	 * not sent again from kept/ */
	char asrc[STG_PATH_MAX + 1], adest[STG_PATH_MAX + 1], id[17], rel[64];
	if (stg__col_names(src, dest, pack, asrc, adest, id) == 0) {
		snprintf(rel, sizeof rel, "collect/%s", id);
		drop_temporaries(r, rel);
	}
	stg__collect_record_move(r->c, src, dest, pack, kept);
	if (pack)
		stg__kept_set_pack(r->c, kept);
	stg__log(r->ctx, STG_LOG_WARN,
	         "results in '%s' were never fully collected to '%s': kept in '%s' (`stager "
	         "collect --kept` sends them)",
	         src, dest, kept);
	if (r->report)
		r->report(r->arg, "keep", kept, bytes);
	free(kept);
	return 0;
}

static void clean_results(cl_run *r)
{
	char **v;
	size_t n = list_dir(r->c, "results", &v);
	for (size_t i = 0; i < n; i++) {
		if (v[i][0] == '.' || !owner_gone(r, v[i]))
			continue;
		keep_run k = {.r = r, .owner = v[i]};
		char rel[STG_PATH_MAX];
		snprintf(rel, sizeof rel, "results/%s", v[i]);
		if (stg__results_each(r->c, v[i], keep_one, &k) && errno != ENOENT)
			stg__log(r->ctx, STG_LOG_WARN, "'%s/%s' is not a results record: %s",
			         r->c->root, rel, strerror(errno));
		if (!k.failed && !r->o->dry_run)
			unlinkat(r->c->rootfd, rel, 0);
	}
	free_list(v, n);
}

/* The record id a name in collect/ belongs to: "<id>" (the record),
 * "<id>.tmp" (a record being rewritten), "<id>.tar.zst" (a pack being
 * made) or ".stager-<tag>.<id>.tar.zst.<pid>.<n>" (that pack's temporary). */
static bool record_id(const char *name, char id[17])
{
	const char *p = name;
	if (!strncmp(p, ".stager-", 8)) {
		p = strchr(p + 8, '.');
		if (!p)
			return false;
		p++;
	}
	for (int i = 0; i < 16; i++)
		if (!isxdigit((unsigned char)p[i]))
			return false;
	if (p[16] != '\0' && p[16] != '.')
		return false;
	memcpy(id, p, 16);
	id[16] = '\0';
	return true;
}

/* Collect records whose source is gone (a finished job's $SLURM_TMPDIR),
 * and what killed collects left (a pack being made, a record being
 * rewritten), unless a collect holds the record's lock. */
static void clean_records(cl_run *r)
{
	char **v;
	size_t n = list_dir(r->c, "collect", &v);
	for (size_t i = 0; i < n; i++) {
		char id[17];
		if (!record_id(v[i], id))
			continue; /* not a name collect makes */
		char lname[40], rel[STG_PATH_MAX], src[STG_PATH_MAX + 1];
		snprintf(lname, sizeof lname, "collect-%s", id);
		snprintf(rel, sizeof rel, "collect/%s", v[i]);
		bool leftover = strcmp(v[i], id) != 0;
		struct stat st;
		if (!leftover && (!record_source(r, rel, src, sizeof src) || lstat(src, &st) == 0 ||
		                  errno != ENOENT))
			continue;
		int lk = stg__cache_lock(r->ctx, r->c, lname, false, NULL);
		if (lk < 0)
			continue; /* a collect is using it */
		if (!leftover)
			drop_temporaries(r, rel);
		drop(r, leftover ? "partial" : "record", rel);
		stg__cache_unlock(lk);
	}
	free_list(v, n);
}

/* With stale pins gone (or, in a dry run, seen as gone), is key pinned? */
static bool pinned(cl_run *r, const char *key)
{
	char owners[64][160];
	size_t n = stg__pins_list(r->c, key, owners, 64);
	for (size_t i = 0; i < n; i++)
		if (!owner_gone(r, owners[i]))
			return true;
	return false;
}

static void clean_entries(cl_run *r)
{
	stg_lru *v;
	size_t n = stg__entries(r->c, &v);
	stg_space sp;
	if (stg__space(r->ctx, r->c, &sp)) {
		free(v);
		return;
	}
	uint64_t used = 0;
	for (size_t i = 0; i < n; i++)
		used += v[i].size;
	uint64_t free_now = sp.fs_free;
	int64_t cutoff = r->o->older_than ? (int64_t)time(NULL) - (int64_t)r->o->older_than : 0;
	/* least recently used first */
	for (size_t i = 0; i < n; i++) {
		bool over = (sp.cache_max && used > sp.cache_max) || free_now < sp.min_free;
		bool old = cutoff && v[i].last_use < cutoff;
		if (!r->o->all && !old && !over)
			continue;
		if (pinned(r, v[i].key))
			continue;
		char rel[STG_PATH_MAX];
		snprintf(rel, sizeof rel, "cache/%s", v[i].key);
		uint64_t bytes = stg__tree_bytes(r->c->rootfd, rel);
		if (!r->o->dry_run && stg__entry_remove(r->c, v[i].key)) {
			stg__log(r->ctx, STG_LOG_WARN, "cannot remove '%s/%s': %s", r->c->root, rel,
			         strerror(errno));
			continue;
		}
		removed(r, "entry", rel, bytes);
		used -= v[i].size < used ? v[i].size : used;
		free_now += bytes;
	}
	free(v);
}

stg_err stg_clean(stg_ctx *ctx, stg_cache *c, const stg_clean_opts *opts, stg_clean_fn report,
                  void *arg, uint64_t *freed)
{
	stg_clean_opts def;
	if (!opts) {
		stg_clean_opts_init(&def);
		opts = &def;
	}
	if (opts->job && !*opts->job)
		return stg__fail(ctx, STG_EUSAGE, "--job needs a job id");
	cl_run r = {.ctx = ctx, .c = c, .o = opts, .report = report, .arg = arg};
	/* one cleaner and no pinning or publishing while it works */
	int lk = stg__cache_lock(ctx, c, "cache", true, NULL);
	if (lk < 0)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot lock the cache in '%s'",
		                       c->root);
	/* mounts whose process died: their pins are then stale too */
	stg__mounts_clean(ctx, c, opts->job, opts->dry_run, report, arg);
	clean_partials(&r);
	clean_pins(&r);
	clean_results(&r); /* before the job directories that hold them go */
	clean_owned(&r, "jobs", "jobdir");
	clean_owned(&r, "bcast", "copy");
	clean_records(&r);
	clean_kept(&r);
	clean_entries(&r);
	if (!opts->dry_run)
		stg__clean_locks(c);
	stg__cache_unlock(lk);
	if (freed)
		*freed = r.freed;
	if (r.keep_failed)
		return stg__fail(
		        ctx, STG_EIO,
		        "%u result director%s that finished jobs never fully collected could "
		        "not be kept (see above): left where they are",
		        r.keep_failed, r.keep_failed == 1 ? "y" : "ies");
	return STG_OK;
}

stg_err stg_unpin(stg_ctx *ctx, stg_cache *c, const char *owner)
{
	if (!*owner || owner[0] == '.' || strchr(owner, '/'))
		return stg__fail(ctx, STG_EUSAGE, "'%s' is not a pin owner", owner);
	int lk = stg__cache_lock(ctx, c, "cache", true, NULL);
	if (lk < 0)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot lock the cache in '%s'",
		                       c->root);
	char **keys;
	size_t nk = list_dir(c, "pins", &keys);
	for (size_t i = 0; i < nk; i++)
		stg__unpin_key(c, keys[i], owner);
	free_list(keys, nk);
	stg__cache_unlock(lk);
	return STG_OK;
}

/* ---- status --------------------------------------------------------------------- */

void stg_cache_info_free(stg_cache_info *info)
{
	if (!info)
		return;
	for (size_t i = 0; i < info->n_entries; i++) {
		stg_cache_entry *e = (stg_cache_entry *)&info->entries[i];
		free((char *)e->key);
		free((char *)e->kind);
		free((char *)e->source);
		for (size_t j = 0; j < e->n_pins; j++)
			free((char *)e->pins[j].owner);
		free((stg_pin *)e->pins);
	}
	free((stg_cache_entry *)info->entries);
	free(info);
}

stg_err stg_cache_status(stg_ctx *ctx, stg_cache *c, stg_cache_info **out)
{
	*out = NULL;
	stg_space sp;
	stg_err err = stg__space(ctx, c, &sp);
	if (err)
		return err;
	stg_cache_info *info = calloc(1, sizeof *info);
	if (!info)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	info->root = c->root;
	info->fs_size = sp.fs_size;
	info->fs_free = sp.fs_free;
	info->fs_files_free = sp.fs_files_free;
	info->cache_max = sp.cache_max;
	info->min_free = sp.min_free;
	stg_lru *v;
	size_t n = stg__entries(c, &v);
	stg_cache_entry *es = calloc(n ? n : 1, sizeof *es);
	if (!es) {
		free(v);
		free(info);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	info->entries = es;
	stg_owner_cache oc = {0};
	for (size_t i = n; i-- > 0;) { /* most recently used first */
		stg_cache_entry *e = &es[info->n_entries];
		stg_meta m;
		if (stg__meta_read(c, v[i].key, &m))
			continue;
		e->key = strdup(v[i].key);
		e->kind = strdup(m.kind);
		e->source = strdup(m.source);
		e->size = m.size;
		e->files = m.files;
		e->last_use = m.last_use;
		char owners[64][160];
		size_t np = stg__pins_list(c, v[i].key, owners, 64);
		stg_pin *pins = calloc(np ? np : 1, sizeof *pins);
		if (!e->key || !e->kind || !e->source || !pins) {
			free(pins);
			info->n_entries++;
			stg_cache_info_free(info);
			free(v);
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		}
		for (size_t j = 0; j < np; j++) {
			pins[j].owner = strdup(owners[j]);
			pins[j].alive = pins[j].owner && stg__owner_alive(&oc, owners[j]);
		}
		e->pins = pins;
		e->n_pins = np;
		info->cache_bytes += e->size;
		info->n_entries++;
	}
	free(v);
	*out = info;
	return STG_OK;
}
