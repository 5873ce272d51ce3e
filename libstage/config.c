/*
 * config.c - stager's settings and where each one came from.
 *
 * Sources, later wins: built-in defaults, the site file (/etc/stager.conf),
 * the user file (~/.config/stager/config), STAGER_<KEY> environment
 * variables, then flags.  Files hold "key = value" lines; '#' starts a
 * comment.  Every value is validated when set, so a typo in a config file
 * is reported with its file and line instead of surfacing later.
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { K_PATH, K_SIZE, K_SIZE_PCT, K_COUNT, K_NAME, K_COMMAND } key_kind;

static const struct {
	const char *name;
	key_kind kind;
	const char *def;
	const char *help;
} keys[] = {
        {"scratch_root", K_PATH, "",
         "stager's directory on node-local scratch (default: the first usable of "
         "/disk/scratch/$USER, /scratch-ssd/$USER, $TMPDIR/stager-$USER)"},
        {"cache_max", K_SIZE_PCT, "0",
         "largest size of the cache (bytes or % of the disk; 0: no cap)"},
        {"min_free", K_SIZE_PCT, "5%", "free space to leave on the scratch disk (bytes or %)"},
        {"max_readers_per_node", K_COUNT, "2",
         "concurrent shared-FS readers and writers per node, all users (0: no limit)"},
        {"slot_dir", K_PATH, "/run/lock/stager",
         "node-local directory (created sticky, world-writable) for the reader slots "
         "(/dev/shm/stager-slots on a node without /run/lock)"},
        {"bwlimit", K_SIZE, "0", "shared-FS bandwidth per process, bytes/s (0: none)"},
        {"ops_limit", K_COUNT, "0",
         "shared-FS metadata operations per second per process, for directory sources and "
         "collect (0: none)"},
        {"shared_lock_dir", K_PATH, "", "directory on the shared FS for cluster-wide leases"},
        {"max_readers_cluster", K_COUNT, "0", "concurrent shared-FS readers per cluster (0: none)"},
        {"slot_wait_max", K_COUNT, "600",
         "seconds stager waits for a node slot or a cluster lease before it goes ahead "
         "without one, with a warning naming the holders (0: no bound)"},
        {"lease_ttl", K_COUNT, "60",
         "seconds a cluster-wide lease lasts unless renewed (a crashed node's lease expires)"},
        {"keep_days", K_COUNT, "14",
         "days that results a job could not collect stay in the scratch root's kept/ "
         "(stager collect --kept sends them; clean --kept removes them sooner)"},
        {"job_tmpdir_var", K_NAME, "SLURM_TMPDIR",
         "environment variable that names a job's own node-local scratch directory, "
         "where stage puts datasets and run the job's files (some sites: JOB_SCRATCH, "
         "TMPDIR); without it, a job directory under the scratch root"},
        {"remote_stager", K_COMMAND, "stager",
         "the stager that push and pull run on the far end (e.g. ~/.local/bin/stager "
         "where stager is not on the login node's non-interactive PATH)"},
        {"stall_timeout", K_COUNT, "30",
         "seconds reading a foreign archive may make no progress before it is refused"},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

struct stg_config {
	char *value[N_KEYS];
	char *origin[N_KEYS];
};

static int key_index(const char *name)
{
	for (size_t i = 0; i < N_KEYS; i++)
		if (!strcmp(keys[i].name, name))
			return (int)i;
	return -1;
}

stg_config *stg_config_new(void)
{
	stg_config *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	for (size_t i = 0; i < N_KEYS; i++) {
		c->value[i] = strdup(keys[i].def);
		c->origin[i] = strdup("default");
		if (!c->value[i] || !c->origin[i]) {
			stg_config_free(c);
			return NULL;
		}
	}
	return c;
}

void stg_config_free(stg_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < N_KEYS; i++) {
		free(c->value[i]);
		free(c->origin[i]);
	}
	free(c);
}

static bool valid(key_kind kind, const char *v)
{
	uint64_t n;
	switch (kind) {
	case K_PATH: return *v == '\0' || *v == '/';
	case K_SIZE: return stg_parse_size(v, &n) == 0;
	case K_SIZE_PCT: {
		size_t len = strlen(v);
		if (len > 1 && v[len - 1] == '%') {
			char *end;
			double p = strtod(v, &end);
			return end == v + len - 1 && p >= 0 && p <= 100;
		}
		return stg_parse_size(v, &n) == 0;
	}
	case K_NAME: /* an environment variable's name */
		if (!(isalpha((unsigned char)*v) || *v == '_'))
			return false;
		for (const char *p = v; *p; p++)
			if (!(isalnum((unsigned char)*p) || *p == '_'))
				return false;
		return true;
	case K_COMMAND: /* one word that a remote shell reads as written */
		if (!*v || *v == '-')
			return false;
		for (const char *p = v; *p; p++)
			if (!(isalnum((unsigned char)*p) || strchr("_./~+-", *p)))
				return false;
		return true;
	case K_COUNT: {
		char *end;
		errno = 0;
		long x = strtol(v, &end, 10);
		return *v && !*end && !errno && x >= 0 && x <= 100000;
	}
	}
	return false;
}

stg_err stg_config_set(stg_ctx *ctx, stg_config *c, const char *key, const char *value,
                       const char *origin)
{
	int i = key_index(key);
	if (i < 0)
		return stg__fail(ctx, STG_EUSAGE, "%s: unknown setting '%s'", origin, key);
	if (!valid(keys[i].kind, value))
		return stg__fail(ctx, STG_EUSAGE, "%s: invalid value '%s' for %s (%s)", origin,
		                 value, key, keys[i].help);
	char *v = strdup(value), *o = strdup(origin);
	if (!v || !o) {
		free(v);
		free(o);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	free(c->value[i]);
	free(c->origin[i]);
	c->value[i] = v;
	c->origin[i] = o;
	return STG_OK;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

stg_err stg_config_load_file(stg_ctx *ctx, stg_config *c, const char *path, int must_exist)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT && !must_exist)
			return STG_OK;
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read config file '%s'",
		                       path);
	}
	char line[4096];
	unsigned lineno = 0;
	stg_err err = STG_OK;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		char origin[STG_PATH_MAX + 32];
		snprintf(origin, sizeof origin, "%s:%u", path, lineno);
		if (!eq) {
			err = stg__fail(ctx, STG_EUSAGE, "%s: expected 'key = value'", origin);
			break;
		}
		*eq = '\0';
		if ((err = stg_config_set(ctx, c, trim(s), trim(eq + 1), origin)))
			break;
	}
	fclose(f);
	return err;
}

stg_err stg_config_load_env(stg_ctx *ctx, stg_config *c)
{
	for (size_t i = 0; i < N_KEYS; i++) {
		char var[64] = "STAGER_";
		size_t n = strlen(var);
		for (const char *k = keys[i].name; *k && n + 1 < sizeof var; k++)
			var[n++] = (char)toupper((unsigned char)*k);
		var[n] = '\0';
		const char *v = getenv(var);
		if (!v)
			continue;
		char origin[80];
		snprintf(origin, sizeof origin, "environment %s", var);
		stg_err err = stg_config_set(ctx, c, keys[i].name, v, origin);
		if (err)
			return err;
	}
	return STG_OK;
}

const char *stg_config_get(const stg_config *c, const char *key, const char **origin)
{
	int i = key_index(key);
	if (i < 0)
		return NULL;
	if (origin)
		*origin = c->origin[i];
	return c->value[i];
}

size_t stg_config_count(void)
{
	return N_KEYS;
}

const char *stg_config_key(size_t i, const char **help)
{
	if (i >= N_KEYS)
		return NULL;
	if (help)
		*help = keys[i].help;
	return keys[i].name;
}

uint64_t stg__config_bytes(const stg_config *c, const char *key, uint64_t whole)
{
	const char *v = stg_config_get(c, key, NULL);
	return v ? stg__bytes_setting(v, whole) : 0;
}

long stg__config_count(const stg_config *c, const char *key)
{
	const char *v = stg_config_get(c, key, NULL);
	return v ? strtol(v, NULL, 10) : 0;
}
