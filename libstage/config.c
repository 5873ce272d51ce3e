/*
 * config.c - stager's settings and where each one came from.
 *
 * Sources, later wins: built-in defaults, the site file (/etc/stager.conf),
 * the user file (~/.config/stager/config), STAGER_<KEY> environment
 * variables, then flags.  Files hold "key = value" lines; '#' starts a
 * comment.  Every value is validated when set, so a typo in a config file
 * is reported with its file and line instead of surfacing later.
 *
 * A configuration file is outside input (on a shared node it may be
 * anything a path can name), so it is read in bounded time and memory: it
 * is opened without blocking (a FIFO nobody writes, a socket), checked on
 * the opened descriptor to be a regular file (not a directory, /dev/zero,
 * /dev/urandom; /dev/null reads as empty), read whole up to
 * STG_CONFIG_MAX_SIZE, and parsed from memory.  A line with a NUL byte or
 * longer than STG_CONFIG_MAX_LINE is an error with its file and line, never
 * cut.  Values echoed in messages are shown with control bytes escaped and
 * cut short.
 */
#include "config.h"
#include "ctx.h"
#include "units.h"
#include "path.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* the longest path a setting may hold: room is left for what stager puts
 * under it (cache/<digest>.tmp.*, a dataset's own paths) */
#define PATH_VALUE_MAX 1024

typedef enum { K_PATH, K_SIZE, K_SIZE_PCT, K_COUNT, K_NAME, K_COMMAND, K_BOOL } key_kind;

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
        {"node_features", K_BOOL, "no",
         "the epilog tells Slurm which packs this node's caches hold (node features "
         "stg_<12 hex>, one per user and pack), so that `sbatch $(stager hint PACK)` "
         "prefers those nodes; a user's own \"no\" keeps their packs out"},
        {"node_features_max", K_COUNT, "16",
         "at most this many of those features per node, shared fairly among users "
         "(each one's most recently used first, in turns)"},
        {"node_features_grace", K_COUNT, "60",
         "seconds a feature stays after its pack left the cache, so that a hint printed a "
         "moment ago never names a feature no node has"},
        {"io_timeout", K_COUNT, "120",
         "seconds push, pull and serve wait for the far end to send or take a byte before "
         "they give up on the connection (0: no bound)"},
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

/* A whole number of digits only ("+5", " 5", "0x5" are not), at most max. */
static bool whole_number(const char *v, long max)
{
	long x = 0;
	if (!*v)
		return false;
	for (const char *p = v; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		x = x * 10 + (*p - '0');
		if (x > max)
			return false;
	}
	return true;
}

/* "12.5": digits, then an optional fraction; a percentage from 0 to 100. */
static bool percentage(const char *v, size_t len)
{
	size_t i = 0, digits = 0;
	while (i < len && v[i] >= '0' && v[i] <= '9')
		i++, digits++;
	if (i < len && v[i] == '.')
		for (i++; i < len && v[i] >= '0' && v[i] <= '9'; i++)
			digits++;
	return digits && i == len && strtod(v, NULL) <= 100;
}

/* NULL if v is a valid value of kind, else why not (for the message). */
static const char *invalid(key_kind kind, const char *v)
{
	uint64_t n;
	size_t len = strlen(v);
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return "a control character";
	switch (kind) {
	case K_PATH:
		if (*v && *v != '/')
			return "not an absolute path";
		return len > PATH_VALUE_MAX ? "longer than 1024 bytes" : NULL;
	case K_SIZE: return stg_parse_size(v, &n) ? "not a size (e.g. 200M) or too large" : NULL;
	case K_SIZE_PCT:
		if (len > 1 && v[len - 1] == '%')
			return percentage(v, len - 1) ? NULL : "not a percentage from 0 to 100";
		return stg_parse_size(v, &n)
		               ? "not a size (e.g. 20G) or a percentage (e.g. 5%), or too large"
		               : NULL;
	case K_NAME: /* an environment variable's name */
		if (!(isalpha((unsigned char)*v) || *v == '_') || len > 255)
			return "not a variable name";
		for (const char *p = v; *p; p++)
			if (!(isalnum((unsigned char)*p) || *p == '_'))
				return "not a variable name";
		return NULL;
	case K_COMMAND: /* one word that a remote shell reads as written */
		if (!*v || *v == '-' || len > PATH_VALUE_MAX)
			return "not a command";
		for (const char *p = v; *p; p++)
			if (!(isalnum((unsigned char)*p) || strchr("_./~+-", *p)))
				return "not one plain word";
		return NULL;
	case K_COUNT: return whole_number(v, 100000) ? NULL : "not a whole number from 0 to 100000";
	case K_BOOL: return !strcmp(v, "yes") || !strcmp(v, "no") ? NULL : "not yes or no";
	}
	return "unknown";
}

/* s for a message: control and non-ASCII bytes as \xNN, cut after ~64
 * characters, so a hostile value neither floods nor drives the terminal. */
static const char *shown(const char *s, char *buf, size_t size)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (o + 8 >= size || o >= 64) {
			snprintf(buf + o, size - o, "...");
			return buf;
		}
		if (*p < 0x20 || *p >= 0x7f || *p == '\\')
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", *p);
		else
			buf[o++] = (char)*p;
	}
	buf[o] = '\0';
	return buf;
}

stg_err stg_config_set(stg_ctx *ctx, stg_config *c, const char *key, const char *value,
                       const char *origin)
{
	char sk[96], sv[96];
	int i = key_index(key);
	if (i < 0)
		return stg__fail(ctx, STG_EUSAGE, "%s: unknown setting '%s'", origin,
		                 shown(key, sk, sizeof sk));
	const char *why = invalid(keys[i].kind, value);
	if (why)
		return stg__fail(ctx, STG_EUSAGE, "%s: invalid value '%s' for %s, %s; %s: %s",
		                 origin, shown(value, sv, sizeof sv), key, why, key, keys[i].help);
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

stg_err stg_config_load_mem(stg_ctx *ctx, stg_config *c, const void *data, size_t len,
                            const char *name)
{
	const char *p = data, *end = p + len;
	char line[STG_CONFIG_MAX_LINE + 1];
	char origin[STG_PATH_MAX + 32];
	unsigned lineno = 0;
	if (len > STG_CONFIG_MAX_SIZE)
		return stg__fail(ctx, STG_EUSAGE,
		                 "config file '%s' is larger than %u MiB: not a configuration "
		                 "file?",
		                 name, STG_CONFIG_MAX_SIZE >> 20);
	if (len >= 3 && !memcmp(p, "\xef\xbb\xbf", 3)) /* a UTF-8 byte order mark */
		p += 3;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);
		lineno++;
		snprintf(origin, sizeof origin, "%s:%u", name, lineno);
		if (memchr(p, '\0', n))
			return stg__fail(ctx, STG_EUSAGE,
			                 "%s: a NUL byte in the line: not a text file?", origin);
		if (n > STG_CONFIG_MAX_LINE)
			return stg__fail(ctx, STG_EUSAGE, "%s: line longer than %d bytes", origin,
			                 STG_CONFIG_MAX_LINE);
		memcpy(line, p, n);
		line[n] = '\0';
		p = nl ? nl + 1 : end;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq || eq == s) {
			char sl[96];
			return stg__fail(ctx, STG_EUSAGE, "%s: expected 'key = value', not '%s'",
			                 origin, shown(s, sl, sizeof sl));
		}
		*eq = '\0';
		stg_err err = stg_config_set(ctx, c, trim(s), trim(eq + 1), origin);
		if (err)
			return err;
	}
	return STG_OK;
}

/* What a file that is not a regular one is, for the message. */
static const char *file_kind(mode_t m)
{
	return S_ISDIR(m)    ? "a directory"
	       : S_ISFIFO(m) ? "a FIFO"
	       : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
	                     : "not a regular file";
}

stg_err stg_config_load_file(stg_ctx *ctx, stg_config *c, const char *path, int must_exist)
{
	/* O_NONBLOCK: opening a FIFO that no one writes must not wait for a
	 * writer; a regular file ignores the flag */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	if (fd < 0) {
		int e = errno;
		if ((e == ENOENT || e == ENOTDIR) && !must_exist)
			return STG_OK;
		/* a socket cannot be opened (ENXIO): say what it is */
		if (!stat(path, &st) && !S_ISREG(st.st_mode))
			return stg__fail(
			        ctx, STG_EUSAGE,
			        "cannot read config file '%s': it is %s, not a regular file", path,
			        file_kind(st.st_mode));
		return stg__fail_errno(ctx, STG_ENOENT, e, "cannot read config file '%s'", path);
	}
	stg_err err = STG_OK;
	char *buf = NULL;
	if (fstat(fd, &st)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot read config file '%s'", path);
		goto out;
	}
	/* /dev/null is the usual way to say "no such file" (a site without
	 * one, a test): it reads as empty, at once */
	if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))
		goto out;
	if (!S_ISREG(st.st_mode)) {
		err = stg__fail(ctx, STG_EUSAGE,
		                "cannot read config file '%s': it is %s, not a regular file", path,
		                file_kind(st.st_mode));
		goto out;
	}
	if (st.st_size > STG_CONFIG_MAX_SIZE) {
		err = stg__fail(ctx, STG_EUSAGE,
		                "config file '%s' is larger than %u MiB (%lld bytes): not a "
		                "configuration file?",
		                path, STG_CONFIG_MAX_SIZE >> 20, (long long)st.st_size);
		goto out;
	}
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	/* read at most one byte past the cap: a file that grows, or one that
	 * says it is empty (/proc), is still bounded */
	size_t cap = (size_t)st.st_size + 1 > 4096 ? (size_t)st.st_size + 1 : 4096, len = 0;
	if (!(buf = malloc(cap))) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	while (len <= STG_CONFIG_MAX_SIZE) {
		if (len == cap) {
			size_t more = cap * 2 > STG_CONFIG_MAX_SIZE + 1 ? STG_CONFIG_MAX_SIZE + 1
			                                                : cap * 2;
			char *b = realloc(buf, more);
			if (!b) {
				err = stg__fail(ctx, STG_ENOMEM, "out of memory");
				goto out;
			}
			buf = b;
			cap = more;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR && !stg__cancelled(ctx))
			continue;
		if (n < 0 && errno == EINTR) {
			err = stg__fail(ctx, STG_EINTR, "interrupted reading config file '%s'",
			                path);
			goto out;
		}
		if (n < 0) {
			err = stg__fail_errno(ctx, STG_EIO, errno, "cannot read config file '%s'",
			                      path);
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	err = stg_config_load_mem(ctx, c, buf, len, path);
out:
	free(buf);
	close(fd);
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

stg_err stg_config_load_standard(stg_ctx *ctx, stg_config *c, const char *path)
{
	const char *site = getenv("STAGER_SITE_CONFIG");
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	char user[4096] = "";
	if (xdg && *xdg == '/')
		snprintf(user, sizeof user, "%s/stager/config", xdg);
	else if (home && *home == '/')
		snprintf(user, sizeof user, "%s/.config/stager/config", home);
	stg_err err = stg_config_load_file(ctx, c, site && *site ? site : "/etc/stager.conf", 0);
	if (!err && path)
		err = stg_config_load_file(ctx, c, path, 1);
	else if (!err && user[0])
		err = stg_config_load_file(ctx, c, user, 0);
	if (!err)
		err = stg_config_load_env(ctx, c);
	return err;
}
