/*
 * node_features.c - data gravity's doings: a user's cached packs as
 * features (stg_features_list), the node's record and Slurm's features
 * updated as root (stg_features_update), and where packs are cached
 * (stg_where).  gravity.c names the features and decides.
 *
 * The epilog runs the list as the job's user and hands its output to the
 * update as root: root reads no file a user could have written.  The
 * node's record, STATE_DIR/node-features.NODE, holds every user's last list,
 * so that one user's update keeps the others' features; it is root's
 * alone (the directory is checked, the file made 0600), taken under a lock, and replaced
 * whole.  Named by the node, so that a directory the nodes share (one
 * on NFS by mistake) still keeps each node's apart.  Its lines: "UID FEATURE LAST_USE LIVE
 * OUT_SINCE".
 *
 * Slurm's features are set only when stager's part of them changes, with
 * the site's own left as they are; a feature Slurm has that the record
 * does not know (the record was lost) gets the grace of one that left.
 */
#include "gravity.h"
#include "cache.h"
#include "config.h"
#include "ctx.h"
#include "fsutil.h"
#include "slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RECORD_NAME  "node-features"
#define RECORD_MAGIC "stager-node-features 1"
#define RECORD_MAX   (1u << 20) /* bytes */
#define RECORD_CAP   4096       /* entries */
#define LIST_MAX     (64u << 10)
#define SLURM_OUT    (16u << 20) /* sinfo's output for a large cluster */
#define NODE_OUT     (1u << 20)  /* scontrol's of one node */
#define LOCK_WAIT    30          /* seconds */

static int setting_on(const stg_config *cfg)
{
	const char *v = stg_config_get(cfg, "node_features", NULL);
	return v && !strcmp(v, "yes");
}

static size_t setting_max(const stg_config *cfg)
{
	long m = stg__config_count(cfg, "node_features_max");
	return m > 0 ? (size_t)m : 0;
}

stg_err stg_features_list(stg_ctx *ctx, const stg_config *cfg, stg_cache *cache, int fd)
{
	size_t max = setting_max(cfg);
	if (!setting_on(cfg) || !max)
		return stg_features_list_none(ctx, fd);
	stg_cache_info *info;
	stg_err err = stg_cache_status(ctx, cache, &info);
	if (err)
		return err;
	const char **f = calloc(max, sizeof *f);
	int64_t *use = calloc(max, sizeof *use);
	if (!f || !use) {
		free(f);
		free(use);
		stg_cache_info_free(info);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	size_t n = stg__cache_packs(info, max, f, use);
	int bad = 0;
	for (size_t i = 0; i < n && !bad; i++) {
		char line[STG_DIGEST_HEXLEN + 32];
		int l = snprintf(line, sizeof line, "%s %" PRId64 "\n", f[i], use[i]);
		bad = stg__write_full(fd, line, (size_t)l) != 0;
	}
	free(f);
	free(use);
	stg_cache_info_free(info);
	if (bad)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot write the list");
	return stg_features_list_none(ctx, fd);
}

stg_err stg_features_list_none(stg_ctx *ctx, int fd)
{
	if (stg__write_full(fd, "end\n", 4))
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot write the list");
	return STG_OK;
}

/* ---- the node's record -------------------------------------------------- */

typedef struct record {
	stg_feat_ent *v;
	size_t n;
} record;

/* The record's file name for node (checked by node_name_ok). */
static void record_name(const char *node, const char *suffix, char *out, size_t len)
{
	snprintf(out, len, "%s.%s%s", RECORD_NAME, node, suffix);
}

/* Read node's record at dirfd (missing: empty). */
static stg_err record_read(stg_ctx *ctx, int dirfd, const char *node, record *r)
{
	char name[300];
	record_name(node, "", name, sizeof name);
	r->v = calloc(RECORD_CAP, sizeof *r->v);
	r->n = 0;
	if (!r->v)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT
		               ? STG_OK
		               : stg__fail_errno(ctx, STG_EIO, errno, "cannot read the record");
	struct stat st;
	char *buf = NULL;
	ssize_t got = -1;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size <= RECORD_MAX &&
	    (buf = malloc((size_t)st.st_size + 1)))
		got = stg__pread_full(fd, buf, (size_t)st.st_size, 0) ? -1 : st.st_size;
	close(fd);
	if (got < 0) {
		free(buf);
		stg__log(ctx, STG_LOG_WARN,
		         "the node's record of features is not readable: starting anew");
		return STG_OK;
	}
	buf[got] = '\0';
	char *save = NULL;
	char *line = strtok_r(buf, "\n", &save);
	if (!line || strcmp(line, RECORD_MAGIC)) {
		free(buf);
		stg__log(ctx, STG_LOG_WARN,
		         "the node's record of features is not one: starting anew");
		return STG_OK;
	}
	while ((line = strtok_r(NULL, "\n", &save)) && r->n < RECORD_CAP)
		if (stg__feat_ent_parse(line, &r->v[r->n]))
			r->n++;
	free(buf);
	return STG_OK;
}

static stg_err record_write(stg_ctx *ctx, const char *dir, const char *node, const record *r)
{
	char name[300], path[4096];
	record_name(node, "", name, sizeof name);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	char *tmp = NULL;
	int fd = stg__create_tmp(path, "rec", &tmp);
	if (fd < 0)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot write in %s", dir);
	/* root's alone whatever the directory's mode (one made 0755 before
	 * stager came): the record ties each feature to its user */
	FILE *f = fchmod(fd, 0600) ? NULL : fdopen(fd, "w");
	int bad = !f;
	if (f) {
		fprintf(f, "%s\n", RECORD_MAGIC);
		for (size_t i = 0; i < r->n; i++)
			fprintf(f, "%u %s %" PRId64 " %d %" PRId64 "\n", r->v[i].uid, r->v[i].name,
			        r->v[i].last_use, r->v[i].live, r->v[i].out_since);
		bad = fclose(f) != 0;
	} else {
		close(fd);
	}
	int e = errno;
	if (bad || stg__replace(tmp, path, false)) {
		e = bad ? e : errno;
		unlink(tmp);
		free(tmp);
		return stg__fail_errno(ctx, STG_EIO, e, "cannot write %s", path);
	}
	free(tmp);
	return STG_OK;
}

/* The state directory, made if missing, and checked to be root's (the
 * caller's) alone: nobody else can plant or change the record. */
static int state_dir_open(stg_ctx *ctx, const char *dir, stg_err *err)
{
	if (!dir || dir[0] != '/') {
		*err = stg__fail(ctx, STG_EUSAGE, "the state directory must be an absolute path");
		return -1;
	}
	if (stg__mkdirs(dir, 0700) && errno != EEXIST) {
		*err = stg__fail_errno(ctx, STG_EIO, errno, "cannot make %s", dir);
		return -1;
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		*err = stg__fail_errno(ctx, STG_EUSAGE, errno, "cannot open %s", dir);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(fd);
		*err = stg__fail(
		        ctx, STG_EUSAGE,
		        "%s is not the state directory's to trust: it must be owned by uid "
		        "%u and writable by nobody else",
		        dir, (unsigned)geteuid());
		return -1;
	}
	return fd;
}

/* An exclusive lock on the record, waited for at most LOCK_WAIT s. */
static int record_lock(stg_ctx *ctx, int dirfd, const char *node)
{
	char name[300];
	record_name(node, ".lock", name, sizeof name);
	int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	for (double t0 = stg__now(); flock(fd, LOCK_EX | LOCK_NB);) {
		if (errno != EWOULDBLOCK || stg__now() - t0 > LOCK_WAIT || stg__nap(ctx, 0.05)) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

/* ---- Slurm -------------------------------------------------------------- */

typedef struct featset {
	char *site;             /* the site's features, comma-separated */
	stg_feature_name *ours; /* stager's */
	size_t n, cap;
} featset;

static void featset_add(void *arg, const char *name, size_t len)
{
	featset *s = arg;
	if (stg__feature_ours(name, len)) {
		if (!stg__grow((void **)&s->ours, &s->cap, s->n + 1, sizeof *s->ours, RECORD_CAP)) {
			memcpy(s->ours[s->n], name, STG_FEATURE_LEN);
			s->ours[s->n++][STG_FEATURE_LEN] = '\0';
		}
		return;
	}
	size_t used = strlen(s->site);
	char *p = realloc(s->site, used + len + 2);
	if (!p)
		return;
	s->site = p;
	if (used)
		p[used++] = ',';
	memcpy(p + used, name, len);
	p[used + len] = '\0';
}

/* The value of "KEY=" in scontrol's one-line output, into a featset. */
static int featset_of(const char *show, const char *key, featset *s)
{
	memset(s, 0, sizeof *s);
	s->site = calloc(1, 1);
	const char *p = strstr(show, key);
	if (!s->site || !p)
		return -1;
	p += strlen(key);
	size_t len = strcspn(p, " \n");
	stg__features_each(p, len, featset_add, s);
	return 0;
}

static void featset_free(featset *s)
{
	free(s->site);
	free(s->ours);
}

static int has_ours(const featset *s, const char *name)
{
	for (size_t j = 0; j < s->n; j++)
		if (!strcmp(s->ours[j], name))
			return 1;
	return 0;
}

/* Are stager's features in s the n of c? */
static int same_ours(const featset *s, const stg_feature_name *c, size_t n)
{
	if (s->n != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!has_ours(s, c[i]))
			return 0;
	return 1;
}

/* "KEY=site,chosen..." */
static char *features_arg(const char *key, const char *site, const stg_feature_name *c, size_t n)
{
	size_t len = strlen(key) + strlen(site) + n * (STG_FEATURE_LEN + 1) + 1;
	char *a = malloc(len);
	if (!a)
		return NULL;
	size_t used = (size_t)snprintf(a, len, "%s%s", key, site);
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(a + used, len - used, "%s%s",
		                         used > strlen(key) ? "," : "", c[i]);
	return a;
}

static int node_name_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 255)
		return 0;
	for (; *s; s++)
		if (!(*s == '-' || *s == '_' || *s == '.' || (*s >= '0' && *s <= '9') ||
		      (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
			return 0;
	return 1;
}

/* scontrol's one line on node, into show (NODE_OUT bytes). */
static stg_err node_show(stg_ctx *ctx, const char *node, char *show)
{
	int status = 0;
	char *argv[] = {"scontrol", "show", "node", "-o", (char *)node, NULL};
	if (stg__capture(argv, show, NODE_OUT, &status) || status)
		return stg__fail(ctx, STG_EREMOTE,
		                 "scontrol show node %s failed: is %s a node of this cluster?",
		                 node, node);
	return STG_OK;
}

stg_err stg_features_update(stg_ctx *ctx, const stg_config *cfg,
                            const stg_features_update_opts *opts, const char *list, size_t len,
                            stg_features_update_result *res)
{
	memset(res, 0, sizeof *res);
	size_t max = setting_max(cfg);
	long grace = stg__config_count(cfg, "node_features_grace");
	if (!setting_on(cfg))
		return STG_OK;
	if (!node_name_ok(opts->node))
		return stg__fail(ctx, STG_EUSAGE, "not a node's name: '%s'",
		                 opts->node ? opts->node : "");
	stg_err err = STG_OK;
	record r = {0};
	featset avail = {0}, active = {0};
	stg_feature_name *chosen = NULL;
	char *show = malloc(NODE_OUT);
	int status = 0;
	if (!show)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	/* the first update here: nothing is made (state directory, lock
	 * file) for a host Slurm does not know; later ones ask under the
	 * lock only */
	char lpath[4096];
	struct stat lst;
	snprintf(lpath, sizeof lpath, "%s/%s.%s.lock", opts->state_dir ? opts->state_dir : "",
	         RECORD_NAME, opts->node);
	if (lstat(lpath, &lst) && errno == ENOENT && (err = node_show(ctx, opts->node, show))) {
		free(show);
		return err;
	}
	int dirfd = state_dir_open(ctx, opts->state_dir, &err);
	if (dirfd < 0) {
		free(show);
		return err;
	}
	int lock = record_lock(ctx, dirfd, opts->node);
	if (lock < 0) {
		close(dirfd);
		free(show);
		return stg__fail(ctx, STG_EIO, "cannot lock the node's record in %s",
		                 opts->state_dir);
	}
	if (!(err = node_show(ctx, opts->node, show)) &&
	    (featset_of(show, " AvailableFeatures=", &avail) ||
	     featset_of(show, " ActiveFeatures=", &active)))
		err = stg__fail(ctx, STG_EREMOTE,
		                "scontrol show node %s: no features in its answer", opts->node);
	if (!err)
		err = record_read(ctx, dirfd, opts->node, &r);
	if (!err && len > LIST_MAX)
		err = stg__fail(ctx, STG_ECORRUPT,
		                "the user's list of features is too long (%zu bytes)", len);
	if (!err) {
		size_t bad = stg__features_merge(r.v, &r.n, RECORD_CAP, opts->uid, list, len, max,
		                                 (int64_t)time(NULL));
		if (bad)
			stg__log(ctx, STG_LOG_WARN,
			         "uid %u's list of features: %zu bad lines ignored", opts->uid,
			         bad);
	}
	if (!err && !(chosen = calloc(max + 2 * avail.n + 1, sizeof *chosen)))
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	size_t k = 0;
	if (!err) {
		int64_t now = (int64_t)time(NULL);
		k = stg__features_plan(r.v, &r.n, RECORD_CAP, avail.ours, avail.n, now, max, grace,
		                       chosen);
		if (k == SIZE_MAX)
			err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	if (!err) {
		res->advertised = k;
		for (size_t i = 0; i < k; i++)
			res->added += !has_ours(&avail, chosen[i]);
		res->removed = avail.n + res->added - k;
		res->changed = !same_ours(&avail, chosen, k) || !same_ours(&active, chosen, k);
	}
	if (!err && res->changed && !opts->dry_run) {
		char *a = features_arg("AvailableFeatures=", avail.site, chosen, k);
		char *b = features_arg("ActiveFeatures=", active.site, chosen, k);
		char node[300];
		snprintf(node, sizeof node, "NodeName=%s", opts->node);
		char *up[] = {"scontrol", "update", node, a, b, NULL};
		if (!a || !b)
			err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		else if (stg__capture(up, show, NODE_OUT, &status) || status)
			err = stg__fail(
			        ctx, STG_EREMOTE,
			        "scontrol update of %s's features failed (exit %d): is this run as "
			        "root (SlurmUser)?",
			        opts->node, status);
		free(a);
		free(b);
	}
	if (!err && !opts->dry_run)
		err = record_write(ctx, opts->state_dir, opts->node, &r);
	free(chosen);
	free(show);
	free(r.v);
	featset_free(&avail);
	featset_free(&active);
	close(lock);
	close(dirfd);
	return err;
}

/* ---- where packs are cached --------------------------------------------- */

stg_err stg_where(stg_ctx *ctx, const char *const *packs, size_t n, stg_where_result *out)
{
	return stg_where_in(ctx, packs, n, NULL, out);
}

stg_err stg_where_in(stg_ctx *ctx, const char *const *packs, size_t n, const char *partition,
                     stg_where_result *out)
{
	memset(out, 0, n * sizeof *out);
	for (size_t i = 0; i < n; i++) {
		stg_pack *p;
		stg_err err = stg_pack_open(ctx, packs[i], &p);
		if (err)
			return err;
		stg_pack_info info;
		stg_pack_get_info(p, &info);
		memcpy(out[i].digest, info.digest, STG_DIGEST_LEN);
		stg_pack_close(p);
		stg_node_feature((unsigned)getuid(), out[i].digest, out[i].feature);
	}
	char *s = malloc(SLURM_OUT);
	int status = 0;
	char *argv[] = {"sinfo", "-h", "-N", "-o", "%N|%f", NULL, NULL, NULL};
	if (partition && *partition) {
		argv[5] = "-p";
		argv[6] = (char *)partition;
	}
	if (!s)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	if (stg__capture(argv, s, SLURM_OUT, &status) || status) {
		free(s);
		return stg__fail(ctx, STG_EREMOTE,
		                 "cannot ask Slurm where packs are cached: sinfo %s",
		                 status ? "failed" : "is not on PATH");
	}
	stg_err err = STG_OK;
	for (size_t i = 0; i < n && !err; i++) {
		size_t cap = strlen(s) + 1;
		if (!(out[i].nodes = malloc(cap)))
			err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		else {
			/* a node whose copy is leaving is not named: a hint that
			 * named it could reach sbatch after it left */
			stg_feature_name leaving;
			stg__feature_leaving(out[i].feature, leaving);
			out[i].n_nodes =
			        stg__nodes_staying(s, out[i].feature, leaving, out[i].nodes, cap);
		}
	}
	free(s);
	return err;
}

void stg_where_free(stg_where_result *w, size_t n)
{
	for (size_t i = 0; w && i < n; i++) {
		free(w[i].nodes);
		w[i].nodes = NULL;
	}
}
