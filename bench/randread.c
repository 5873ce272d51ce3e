/*
 * randread - random small reads in the files of a tree, as a data loader
 * that samples a dataset makes them, and how many per second.
 *
 *   randread [--threads T] [--count N] [--size BYTES] [--seed S]
 *            [--max-seconds X] [--verify DIR] ROOT LIST
 *
 * LIST holds one file a line, "SIZE PATH" with PATH relative to ROOT (made
 * from the source tree beforehand, so that no stat() of the tree under test
 * is spent on choosing).  Each of T threads makes N/T reads (the first
 * N%T threads one more): a file chosen uniformly, an offset uniformly in
 * [0, SIZE - BYTES] (0 for a file smaller than BYTES, which is then read
 * whole), then open(2), one pread(2) of BYTES, close(2).  Every thread has
 * its own xorshift64* generator seeded from S and its index, so a run is
 * the same sequence of reads whatever the timing.  With --max-seconds, a
 * thread stops early once X seconds have passed (for the tools where N
 * reads would take too long): the rate is of the reads made.  With
 * --verify DIR, each read is compared with the same range of DIR/PATH (a
 * correctness run: do not time it).  One line on stdout:
 *
 *   reads=N bytes=B seconds=S reads_per_s=R threads=T
 *
 * seconds from CLOCK_MONOTONIC, from before the threads start to after the
 * last one ends.  Exit 0, or 1 at the first failed open, read, short read
 * or mismatch (named on stderr), 2 for a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct file {
	long long size;
	char *path; /* ROOT/PATH */
	char *ref;  /* DIR/PATH with --verify, else NULL */
};

struct worker {
	pthread_t tid;
	uint64_t rng;
	long want;
	long done;
	long long bytes;
	int failed;
};

static struct file *files;
static size_t nfiles;
static size_t bsize = 4096;
static double deadline;   /* 0: none */
static volatile int stop; /* set by the first thread that fails */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: randread [--threads T] [--count N] [--size BYTES] [--seed S]\n"
	                "                [--max-seconds X] [--verify DIR] ROOT LIST\n");
	exit(2);
}

/* read LEN bytes at OFF of PATH into BUF: 0, or -1 with a message */
static int read_at(const char *path, char *buf, size_t len, long long off)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "randread: cannot open '%s': %s\n", path, strerror(errno));
		return -1;
	}
	ssize_t n = pread(fd, buf, len, off);
	int err = errno;
	close(fd);
	if (n < 0) {
		fprintf(stderr, "randread: cannot read '%s' at %lld: %s\n", path, off,
		        strerror(err));
		return -1;
	}
	if ((size_t)n != len) {
		fprintf(stderr, "randread: short read of '%s' at %lld: %zd of %zu bytes\n", path,
		        off, n, len);
		return -1;
	}
	return 0;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	char *buf = malloc(bsize), *ref = malloc(bsize);
	if (!buf || !ref) {
		fprintf(stderr, "randread: out of memory\n");
		w->failed = 1;
		goto out;
	}
	for (; w->done < w->want && !stop; w->done++) {
		if (deadline > 0 && now() >= deadline)
			break;
		const struct file *f = &files[next(&w->rng) % nfiles];
		size_t len = f->size < (long long)bsize ? (size_t)f->size : bsize;
		long long off = 0;
		if (f->size > (long long)bsize)
			off = (long long)(next(&w->rng) %
			                  (uint64_t)(f->size - (long long)bsize + 1));
		if (read_at(f->path, buf, len, off) < 0) {
			w->failed = 1;
			break;
		}
		if (f->ref) {
			if (read_at(f->ref, ref, len, off) < 0) {
				w->failed = 1;
				break;
			}
			if (memcmp(buf, ref, len) != 0) {
				fprintf(stderr,
				        "randread: '%s' differs from '%s' at %lld (%zu bytes)\n",
				        f->path, f->ref, off, len);
				w->failed = 1;
				break;
			}
		}
		w->bytes += (long long)len;
	}
out:
	if (w->failed)
		stop = 1;
	free(buf);
	free(ref);
	return NULL;
}

static char *join(const char *dir, const char *rel)
{
	size_t a = strlen(dir), b = strlen(rel);
	char *p = malloc(a + b + 2);
	if (!p) {
		fprintf(stderr, "randread: out of memory\n");
		exit(1);
	}
	memcpy(p, dir, a);
	p[a] = '/';
	memcpy(p + a + 1, rel, b + 1);
	return p;
}

static long number(const char *s, const char *what)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < 0) {
		fprintf(stderr, "randread: %s wants a number, not '%s'\n", what, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	long threads = 1, count = 2000, seed = 1;
	double max_seconds = 0;
	const char *verify = NULL;
	int i;
	for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
		const char *o = argv[i];
		if (!strcmp(o, "--")) {
			i++;
			break;
		}
		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];
		if (!strcmp(o, "--threads"))
			threads = number(v, "--threads");
		else if (!strcmp(o, "--count"))
			count = number(v, "--count");
		else if (!strcmp(o, "--size"))
			bsize = (size_t)number(v, "--size");
		else if (!strcmp(o, "--seed"))
			seed = number(v, "--seed");
		else if (!strcmp(o, "--max-seconds"))
			max_seconds = atof(v);
		else if (!strcmp(o, "--verify"))
			verify = v;
		else
			usage();
	}
	if (argc - i != 2 || threads < 1 || threads > 256 || bsize < 1)
		usage();
	const char *root = argv[i], *list = argv[i + 1];

	FILE *fp = fopen(list, "r");
	if (!fp) {
		fprintf(stderr, "randread: cannot open '%s': %s\n", list, strerror(errno));
		return 1;
	}
	size_t cap = 0;
	char *line = NULL;
	size_t linecap = 0;
	ssize_t n;
	while ((n = getline(&line, &linecap, fp)) > 0) {
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		char *sp = strchr(line, ' ');
		if (!sp || sp == line)
			continue;
		*sp = '\0';
		if (nfiles == cap) {
			cap = cap ? 2 * cap : 1024;
			struct file *nf = realloc(files, cap * sizeof *files);
			if (!nf) {
				fprintf(stderr, "randread: out of memory\n");
				return 1;
			}
			files = nf;
		}
		files[nfiles].size = strtoll(line, NULL, 10);
		files[nfiles].path = join(root, sp + 1);
		files[nfiles].ref = verify ? join(verify, sp + 1) : NULL;
		nfiles++;
	}
	free(line);
	fclose(fp);
	if (!nfiles) {
		fprintf(stderr, "randread: no files in '%s'\n", list);
		return 1;
	}

	struct worker *w = calloc((size_t)threads, sizeof *w);
	if (!w) {
		fprintf(stderr, "randread: out of memory\n");
		return 1;
	}
	double t0 = now();
	if (max_seconds > 0)
		deadline = t0 + max_seconds;
	for (long t = 0; t < threads; t++) {
		w[t].rng = ((uint64_t)seed * 1000003u + (uint64_t)t) * 0x9E3779B97F4A7C15ULL | 1;
		w[t].want = count / threads + (t < count % threads);
		int e = pthread_create(&w[t].tid, NULL, run, &w[t]);
		if (e) {
			fprintf(stderr, "randread: cannot start a thread: %s\n", strerror(e));
			return 1;
		}
	}
	long done = 0;
	long long bytes = 0;
	int failed = 0;
	for (long t = 0; t < threads; t++) {
		pthread_join(w[t].tid, NULL);
		done += w[t].done;
		bytes += w[t].bytes;
		failed |= w[t].failed;
	}
	double secs = now() - t0;
	printf("reads=%ld bytes=%lld seconds=%.6f reads_per_s=%.1f threads=%ld\n", done, bytes,
	       secs, secs > 0 ? done / secs : 0.0, threads);
	return failed ? 1 : 0;
}
