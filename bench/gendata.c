/*
 * gendata - deterministic benchmark datasets for stager.
 *
 *   gendata images DIR [--files N] [--classes N] [--sizes MIN-MAX] [--bits B] [--seed S]
 *   gendata shards DIR [--count N] [--size SIZE] [--bits B] [--seed S]
 *   gendata file PATH --size SIZE [--bits B] [--seed S]
 *
 * images: an image-folder dataset, N files (default 20000) spread evenly
 *   over C class folders (default 100) class_000/ ..., named
 *   img_000000.jpg ...; sizes lognormal with median 8 KiB and sigma 1.0
 *   (mean about 13.5 KB), clamped to [256 B, 4 MiB]; with --sizes, uniform
 *   in [MIN, MAX] instead.
 * shards: N files shard_000.bin ... of SIZE bytes each (default 8 x 256M).
 * file:   one file of SIZE bytes (created or truncated).
 *
 * Contents are incompressible (xoshiro256** output); --bits B (1 to 8, default
 * 8) keeps only the low B bits of each byte: B bits of entropy a byte, no
 * repeats to find, so zstd compresses it to about B/8 by entropy coding alone
 * (compressible, but not trivially: every byte goes through the coder).  The same arguments
 * and seed give byte-identical trees; every file and directory gets the
 * same fixed mtime (2024-01-01T00:00:00Z) so packs of them are reproducible.
 * DIR must not exist or be empty.  SIZE takes K, M, G, T (powers of 1024).
 * Prints a one-line summary on stderr.  Exit status: 0 ok, 1 usage error,
 * 7 I/O error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 1
#define EXIT_IO    7

#define BUF_SIZE    (1u << 20)
#define FIXED_MTIME 1704067200 /* 2024-01-01T00:00:00Z */

#define IMG_MEDIAN 8192.0
#define IMG_SIGMA  1.0
#define IMG_MIN    256u
#define IMG_MAX    (4u << 20)

static const char *prog = "gendata";

/* ---- PRNG: splitmix64 seeding xoshiro256** ------------------------------ */

typedef struct rng {
	uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* uniform in (0, 1] */
static double rng_unit(rng *r)
{
	return ((rng_next(r) >> 11) + 1) * 0x1.0p-53;
}

/* standard normal (Box-Muller, one value per call: simple and deterministic) */
static double rng_normal(rng *r)
{
	double u1 = rng_unit(r), u2 = rng_unit(r);
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Fill buf with n bytes of PRNG output (n need not be a multiple of 8). */
static void rng_fill(rng *r, unsigned char *buf, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = rng_next(r);
		memcpy(buf + i, &v, 8);
	}
	if (i < n) {
		uint64_t v = rng_next(r);
		memcpy(buf + i, &v, n - i);
	}
}

/* rng_fill, then only the low bits of each byte that mask keeps */
static void fill(rng *r, unsigned char *buf, size_t n, uint64_t mask)
{
	rng_fill(r, buf, n);
	if (mask == UINT64_MAX)
		return;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v;
		memcpy(&v, buf + i, 8);
		v &= mask;
		memcpy(buf + i, &v, 8);
	}
	for (; i < n; i++)
		buf[i] &= (unsigned char)mask;
}

/* ---- errors ----------------------------------------------------------- */

static void usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr,
	        "\nusage: %s images DIR [--files N] [--classes N] [--sizes MIN-MAX] [--bits B] "
	        "[--seed S]\n"
	        "       %s shards DIR [--count N] [--size SIZE] [--bits B] [--seed S]\n"
	        "       %s file PATH --size SIZE [--bits B] [--seed S]\n",
	        prog, prog, prog);
	exit(EXIT_USAGE);
}

static void io_error(const char *what, const char *path)
{
	fprintf(stderr, "%s: %s %s: %s\n", prog, what, path, strerror(errno));
	exit(EXIT_IO);
}

/* ---- argument parsing --------------------------------------------------- */

static uint64_t parse_u64(const char *opt, const char *s)
{
	char *end;
	if (*s < '0' || *s > '9')
		usage_error("%s: not a number: '%s'", opt, s);
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		usage_error("%s: not a number: '%s'", opt, s);
	return v;
}

/* "123", "4K", "256M", "1G", "2T", also "1GiB", "1GB" */
static uint64_t parse_size(const char *opt, const char *s)
{
	char *end;
	if (*s < '0' || *s > '9')
		usage_error("%s: not a size: '%s'", opt, s);
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		usage_error("%s: not a size: '%s'", opt, s);
	int shift = 0;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	default: break;
	}
	if (shift && (*end == 'i' || *end == 'I') && (end[1] == 'B' || end[1] == 'b'))
		end += 2;
	else if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		usage_error("%s: not a size: '%s'", opt, s);
	if (shift && v > (UINT64_MAX >> shift))
		usage_error("%s: too large: '%s'", opt, s);
	return (uint64_t)v << shift;
}

typedef struct opts {
	const char *cmd;
	const char *path;
	uint64_t files, classes, count, size, seed;
	uint64_t min_size, max_size; /* --sizes; 0: lognormal */
	uint64_t mask;               /* --bits, applied to every 8 bytes */
	int have_size;
} opts;

/* Options may come before or after the positional argument; "--opt VAL"
 * and "--opt=VAL" are both accepted. */
static void parse_args(int argc, char **argv, opts *o)
{
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || a[1] == '\0') {
			if (o->path)
				usage_error("unexpected argument '%s'", a);
			o->path = a;
			continue;
		}
		if (!strcmp(a, "--")) {
			if (i + 1 < argc && !o->path)
				o->path = argv[++i];
			if (i + 1 < argc)
				usage_error("unexpected argument '%s'", argv[i + 1]);
			break;
		}
		char name[32];
		const char *val = NULL;
		const char *eq = strchr(a, '=');
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		if (len >= sizeof name)
			usage_error("unknown option '%s'", a);
		memcpy(name, a, len);
		name[len] = '\0';
		if (eq) {
			val = eq + 1;
		} else {
			if (i + 1 >= argc)
				usage_error("%s needs a value", name);
			val = argv[++i];
		}
		int images = !strcmp(o->cmd, "images"), shards = !strcmp(o->cmd, "shards");
		if (!strcmp(name, "--seed"))
			o->seed = parse_u64(name, val);
		else if (images && !strcmp(name, "--files"))
			o->files = parse_u64(name, val);
		else if (images && !strcmp(name, "--classes"))
			o->classes = parse_u64(name, val);
		else if (images && !strcmp(name, "--sizes")) {
			const char *dash = strchr(val, '-');
			if (!dash || dash == val || (size_t)(dash - val) >= 32)
				usage_error("%s: want MIN-MAX, not '%s'", name, val);
			char lo[32];
			memcpy(lo, val, (size_t)(dash - val));
			lo[dash - val] = '\0';
			o->min_size = parse_size(name, lo);
			o->max_size = parse_size(name, dash + 1);
			if (o->min_size == 0 || o->min_size > o->max_size || o->max_size > IMG_MAX)
				usage_error("%s: want 1 <= MIN <= MAX <= 4M, not '%s'", name, val);
		} else if (!strcmp(name, "--bits")) {
			uint64_t b = parse_u64(name, val);
			if (b < 1 || b > 8)
				usage_error("%s: want 1 to 8, not '%s'", name, val);
			o->mask = 0x0101010101010101ULL * ((1u << b) - 1);
		} else if (shards && !strcmp(name, "--count"))
			o->count = parse_u64(name, val);
		else if (!images && !strcmp(name, "--size")) {
			o->size = parse_size(name, val);
			o->have_size = 1;
		} else
			usage_error("unknown option '%s' for '%s'", name, o->cmd);
	}
	if (!o->path)
		usage_error("%s: missing %s", o->cmd, strcmp(o->cmd, "file") ? "DIR" : "PATH");
}

/* ---- file system helpers ----------------------------------------------- */

/* Create the missing parents of path (like mkdir -p on its dirname). */
static void make_parents(const char *path)
{
	char *p = strdup(path);
	if (!p) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(EXIT_IO);
	}
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			io_error("cannot create", p);
		*s = '/';
	}
	free(p);
}

/* Create dir (and its parents); an existing one is accepted only when
 * empty. */
static void make_empty_dir(const char *path)
{
	if (mkdir(path, 0755) == 0)
		return;
	if (errno == ENOENT) {
		make_parents(path);
		if (mkdir(path, 0755) == 0)
			return;
	}
	if (errno != EEXIST)
		io_error("cannot create", path);
	DIR *d = opendir(path);
	if (!d)
		io_error("cannot open", path);
	struct dirent *e;
	errno = 0;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			closedir(d);
			fprintf(stderr, "%s: %s exists and is not empty\n", prog, path);
			exit(EXIT_USAGE);
		}
	}
	if (errno)
		io_error("cannot read", path);
	closedir(d);
}

static void set_fixed_mtime(const char *path)
{
	struct timespec ts[2] = {{FIXED_MTIME, 0}, {FIXED_MTIME, 0}};
	if (utimensat(AT_FDCWD, path, ts, 0) != 0)
		io_error("cannot set mtime of", path);
}

static void write_all(int fd, const unsigned char *buf, size_t n, const char *path)
{
	while (n) {
		ssize_t w = write(fd, buf, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			io_error("cannot write", path);
		}
		buf += w;
		n -= (size_t)w;
	}
}

/* Write a file of size bytes of PRNG output. */
static void gen_file(const char *path, uint64_t size, rng *r, unsigned char *buf, int excl,
                     uint64_t mask)
{
	int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (excl ? O_EXCL : O_TRUNC);
	int fd = open(path, flags, 0644);
	if (fd < 0 && errno == ENOENT && !excl) {
		make_parents(path);
		fd = open(path, flags, 0644);
	}
	if (fd < 0)
		io_error("cannot create", path);
	while (size) {
		size_t n = size < BUF_SIZE ? (size_t)size : BUF_SIZE;
		fill(r, buf, n, mask);
		write_all(fd, buf, n, path);
		size -= n;
	}
	struct timespec ts[2] = {{FIXED_MTIME, 0}, {FIXED_MTIME, 0}};
	if (futimens(fd, ts) != 0)
		io_error("cannot set mtime of", path);
	if (close(fd) != 0)
		io_error("cannot close", path);
}

static char *join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);
	if (!p) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(EXIT_IO);
	}
	memcpy(p, dir, a);
	p[a] = '/';
	memcpy(p + a + 1, name, b + 1);
	return p;
}

static void summary(const char *what, uint64_t files, uint64_t bytes, const char *path)
{
	fprintf(stderr, "%s: %s: %" PRIu64 " files, %" PRIu64 " bytes (%.1f MiB) in %s\n", prog,
	        what, files, bytes, bytes / 1048576.0, path);
}

/* ---- subcommands ------------------------------------------------------- */

static void cmd_images(const opts *o, unsigned char *buf)
{
	if (o->files == 0 || o->classes == 0)
		usage_error("images: --files and --classes must be at least 1");
	if (o->classes > 1000000 || o->files > 100000000)
		usage_error("images: too many files or classes");
	uint64_t classes = o->classes < o->files ? o->classes : o->files;
	rng r;
	rng_seed(&r, o->seed);
	make_empty_dir(o->path);
	uint64_t total = 0, i = 0;
	double mu = log(IMG_MEDIAN);
	for (uint64_t c = 0; c < classes; c++) {
		/* class c holds files [c*N/C, (c+1)*N/C): even, contiguous */
		uint64_t end = (c + 1) * o->files / classes;
		char name[32];
		snprintf(name, sizeof name, "class_%03" PRIu64, c);
		char *dir = join(o->path, name);
		make_empty_dir(dir);
		for (; i < end; i++) {
			uint64_t size;
			if (o->max_size) {
				size = o->min_size + rng_next(&r) % (o->max_size - o->min_size + 1);
			} else {
				double s = exp(mu + IMG_SIGMA * rng_normal(&r));
				size = s < IMG_MIN ? IMG_MIN : s > IMG_MAX ? IMG_MAX : (uint64_t)s;
			}
			snprintf(name, sizeof name, "img_%06" PRIu64 ".jpg", i);
			char *p = join(dir, name);
			gen_file(p, size, &r, buf, 1, o->mask);
			free(p);
			total += size;
		}
		set_fixed_mtime(dir);
		free(dir);
	}
	set_fixed_mtime(o->path);
	char what[64];
	snprintf(what, sizeof what, "images (%" PRIu64 " classes)", classes);
	summary(what, o->files, total, o->path);
}

static void cmd_shards(const opts *o, unsigned char *buf)
{
	if (o->count > 1000000)
		usage_error("shards: --count too large");
	rng r;
	rng_seed(&r, o->seed);
	make_empty_dir(o->path);
	for (uint64_t i = 0; i < o->count; i++) {
		char name[32];
		snprintf(name, sizeof name, "shard_%03" PRIu64 ".bin", i);
		char *p = join(o->path, name);
		gen_file(p, o->size, &r, buf, 1, o->mask);
		free(p);
	}
	set_fixed_mtime(o->path);
	summary("shards", o->count, o->count * o->size, o->path);
}

static void cmd_file(const opts *o, unsigned char *buf)
{
	if (!o->have_size)
		usage_error("file: --size is required");
	rng r;
	rng_seed(&r, o->seed);
	gen_file(o->path, o->size, &r, buf, 0, o->mask);
	summary("file", 1, o->size, o->path);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: %s images DIR [--files N] [--classes N] [--sizes MIN-MAX] [--bits "
		       "B] [--seed S]\n"
		       "       %s shards DIR [--count N] [--size SIZE] [--bits B] [--seed S]\n"
		       "       %s file PATH --size SIZE [--bits B] [--seed S]\n"
		       "Deterministic benchmark data (default seed 1), incompressible unless\n"
		       "--bits B < 8 (B random bits a byte: zstd gets it to about B/8).\n"
		       "SIZE takes K M G T (powers of 1024).  Exit: 0 ok, 1 usage, 7 I/O.\n",
		       prog, prog, prog);
		return 0;
	}
	if (argc < 2)
		usage_error("missing subcommand");
	opts o = {.cmd = argv[1],
	          .files = 20000,
	          .classes = 100,
	          .count = 8,
	          .size = 256ull << 20,
	          .seed = 1,
	          .mask = UINT64_MAX};
	if (strcmp(o.cmd, "images") && strcmp(o.cmd, "shards") && strcmp(o.cmd, "file"))
		usage_error("unknown subcommand '%s'", o.cmd);
	parse_args(argc, argv, &o);

	unsigned char *buf = malloc(BUF_SIZE);
	if (!buf) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return EXIT_IO;
	}
	if (!strcmp(o.cmd, "images"))
		cmd_images(&o, buf);
	else if (!strcmp(o.cmd, "shards"))
		cmd_shards(&o, buf);
	else
		cmd_file(&o, buf);
	free(buf);
	return 0;
}
