/*
 * runstat - run a command and report its wall time and peak RSS.
 *
 *   runstat [-o FILE] [--] CMD [ARG]...
 *
 * Runs CMD (searched in PATH) with stdin, stdout and stderr inherited, waits
 * for it with wait4() and prints one line
 *
 *   wall=SECONDS maxrss_kib=N status=N
 *
 * appended to FILE, or on stderr.  wall is measured with CLOCK_MONOTONIC from
 * just before fork() to the return of wait4(); maxrss_kib is the child's
 * ru_maxrss (the largest RSS of the child or of any descendant it waited
 * for).  status is the exit status, or 128+N when killed by signal N.
 * runstat exits with that status; its own failures exit 125, a command that
 * cannot be executed 126, one that is not found 127 (as env(1) does).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_SELF 125

static void usage(void)
{
	fprintf(stderr, "usage: runstat [-o FILE] [--] CMD [ARG]...\n");
	exit(EXIT_SELF);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	int i = 1;
	while (i < argc && argv[i][0] == '-') {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (!strcmp(argv[i], "-o")) {
			if (i + 1 >= argc)
				usage();
			out = argv[i + 1];
			i += 2;
		} else if (!strncmp(argv[i], "-o", 2)) {
			out = argv[i] + 2;
			i++;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: runstat [-o FILE] [--] CMD [ARG]...\n"
			       "Runs CMD; appends 'wall=SECONDS maxrss_kib=N status=N' to FILE\n"
			       "(default: stderr); exits with CMD's status (128+N if killed by\n"
			       "signal N).\n");
			return 0;
		} else {
			fprintf(stderr, "runstat: unknown option '%s'\n", argv[i]);
			usage();
		}
	}
	if (i >= argc)
		usage();

	/* open the report file first: a bad path should fail before the run */
	FILE *f = stderr;
	if (out) {
		f = fopen(out, "a");
		if (!f) {
			fprintf(stderr, "runstat: cannot open %s: %s\n", out, strerror(errno));
			return EXIT_SELF;
		}
	}

	/* like time(1): the terminal's interrupt goes to the child; we report */
	struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
	sigemptyset(&ign.sa_mask);
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);

	fflush(NULL);
	double t0 = now();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "runstat: fork: %s\n", strerror(errno));
		return EXIT_SELF;
	}
	if (pid == 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGQUIT, &old_quit, NULL);
		if (f != stderr)
			fclose(f);
		execvp(argv[i], argv + i);
		int e = errno;
		fprintf(stderr, "runstat: %s: %s\n", argv[i], strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}

	int st;
	struct rusage ru;
	pid_t r;
	do
		r = wait4(pid, &st, 0, &ru);
	while (r < 0 && errno == EINTR);
	double wall = now() - t0;
	if (r < 0) {
		fprintf(stderr, "runstat: wait4: %s\n", strerror(errno));
		return EXIT_SELF;
	}

	int status = WIFEXITED(st)     ? WEXITSTATUS(st)
	             : WIFSIGNALED(st) ? 128 + WTERMSIG(st)
	                               : EXIT_SELF;
	fprintf(f, "wall=%.6f maxrss_kib=%ld status=%d\n", wall, ru.ru_maxrss, status);
	if (f != stderr && fclose(f) != 0) {
		fprintf(stderr, "runstat: cannot write %s: %s\n", out, strerror(errno));
		return EXIT_SELF;
	}
	return status;
}
