/*
 * mount_share.c - a mount's record, and a Python env's mount shared by
 * every process that serves it on the node.
 *
 * An env is served at its own path (env.c), so two jobs of one user on a
 * node that use it need the same mount, and neither may take it away from
 * the other: a process of one job may hold a library of the env mapped
 * that the other job's server answered for.  So the mount is the node's
 * (per mount namespace), and every job that uses it runs a server of it.
 * The first one mounts; each later one joins: it asks a live server, over
 * a unix socket in the scratch root (mounts/<owner>.sock; 0700, and the
 * peer's uid checked), for the FUSE device and the INIT request the
 * session began with, opens a device of its own as a clone of it
 * (FUSE_DEV_IOC_CLONE) and answers the same INIT to its own libfuse
 * (mount.c).  Requests go to whichever server reads them first; since
 * nothing is kept per open file (the kernel opens without asking) and
 * inode numbers come from the pack's manifest, any server answers any of
 * them.  A server that ends (its job over) takes its device with it: the
 * kernel ends the requests it had taken with an error, the mount lives on
 * with the others.  The last one unmounts.  Joining and leaving hold one
 * lock per mount (locks/env-<ns>-<hash>), so that the last server is
 * never mistaken: a leaver counts the others' records under it, and
 * removes its own after it has unmounted (if last), so that one killed
 * meanwhile leaves a record by which clean finds the mount.
 *
 * The server also hands out the env's own directory as it is under the
 * mount (a descriptor opened before mounting), so that a joiner checks
 * the env on the shared filesystem, not the pack it is served from.
 */
#include "mount_share.h"
#include "mount.h"
#include "mount_list.h"
#include "ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <xxhash.h>

#define ASK_TIMEOUT_MS 5000 /* a live server's answer, at most */
#define MSG_MAX        8192 /* an answer: "STGENV1 DIGEST LEN\n" and the INIT request */
#define MAX_SERVERS    64

struct stg_share {
	stg_cache *cache;
	char mountpoint[STG_PATH_MAX + 1];
	unsigned long long ns; /* the mount namespace's inode */
	char lock[64];
	int envfd; /* the env's directory itself, under the mount (O_PATH) */
	/* this server's socket for those that join, and its thread */
	int sock;
	int wake[2];
	pthread_t t;
	bool listening;
	stg_mount *m;
};

/* ---- records ---------------------------------------------------------------------- */

static int mounts_dir(stg_cache *c)
{
	if (mkdirat(c->rootfd, "mounts", 0700) && errno != EEXIST)
		return -1;
	return openat(c->rootfd, "mounts", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static void put_line(FILE *f, const char *s)
{
	for (; *s; s++)
		putc(*s == '\n' ? '?' : *s, f);
	putc('\n', f);
}

void stg__mount_record_write(stg_mount *m)
{
	int dfd = mounts_dir(m->cache);
	if (dfd < 0)
		return;
	char tmp[200];
	snprintf(tmp, sizeof tmp, "%s.tmp", m->owner);
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		FILE *f = fdopen(fd, "w");
		if (f) {
			/* a newline in a pack's name would end its line: the
			 * names are for people, the digests for clean */
			fprintf(f, "%s\n", m->mountpoint);
			put_line(f, m->packs[0].path);
			fprintf(f, "%s\n%s\n", m->packs[0].digest, m->job);
			for (size_t i = 1; i < m->n_packs; i++) {
				fprintf(f, "%s ", m->packs[i].digest);
				put_line(f, m->packs[i].path);
			}
			if (m->share)
				fprintf(f, "env %llu\n", m->share->ns);
			if (fclose(f) == 0 && renameat(dfd, tmp, dfd, m->owner) == 0)
				snprintf(m->record, sizeof m->record, "%s", m->owner);
		} else {
			close(fd);
		}
	}
	close(dfd);
}

void stg__mount_record_remove(stg_mount *m)
{
	if (!m->record[0])
		return;
	int dfd =
	        openat(m->cache->rootfd, "mounts", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0) {
		unlinkat(dfd, m->record, 0);
		close(dfd);
	}
	m->record[0] = '\0';
}

/* ---- the share ------------------------------------------------------------------ */

stg_err stg__share_new(stg_ctx *ctx, stg_cache *c, const char *mountpoint, stg_share **out)
{
	struct stat ns;
	if (stat("/proc/self/ns/mnt", &ns))
		return stg__fail_errno(ctx, STG_EIO, errno, "/proc/self/ns/mnt");
	stg_share *sh = calloc(1, sizeof *sh);
	if (!sh)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	sh->cache = c;
	sh->ns = (unsigned long long)ns.st_ino;
	sh->envfd = sh->sock = sh->wake[0] = sh->wake[1] = -1;
	snprintf(sh->mountpoint, sizeof sh->mountpoint, "%s", mountpoint);
	snprintf(sh->lock, sizeof sh->lock, "env-%llu-%016llx", sh->ns,
	         (unsigned long long)XXH3_64bits(mountpoint, strlen(mountpoint)));
	*out = sh;
	return STG_OK;
}

int stg__share_envfd(const stg_share *sh)
{
	return sh->envfd;
}

const char *stg__share_mountpoint(const stg_share *sh)
{
	return sh->mountpoint;
}

static void sock_name(const char *owner, char *buf, size_t len)
{
	/* an owner is "pid-PID-START": short */
	snprintf(buf, len, "%.50s.sock", owner);
}

/* The address of mounts/NAME, short whatever the scratch root's length:
 * through the descriptor of mounts/ (dfd). */
static void sock_addr(int dfd, const char *name, struct sockaddr_un *a)
{
	memset(a, 0, sizeof *a);
	a->sun_family = AF_UNIX;
	snprintf(a->sun_path, sizeof a->sun_path, "/proc/self/fd/%d/%s", dfd, name);
}

/* Ask the live server owner for the session: the FUSE device (*fuse),
 * the env's directory (*envfd), the INIT request and the pack's digest. */
static stg_err ask(stg_ctx *ctx, stg_share *sh, const char *owner, int *fuse, int *envfd,
                   uint8_t **init, size_t *init_len, char digest[STG_DIGEST_HEXLEN + 1])
{
	*fuse = *envfd = -1;
	int dfd = mounts_dir(sh->cache);
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	char name[64];
	sock_name(owner, name, sizeof name);
	struct sockaddr_un a;
	sock_addr(dfd, name, &a);
	stg_err err = STG_EIO;
	char buf[MSG_MAX + 1];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(2 * sizeof(int))];
	} cm;
	struct iovec iov = {buf, MSG_MAX};
	struct msghdr msg = {.msg_iov = &iov,
	                     .msg_iovlen = 1,
	                     .msg_control = cm.b,
	                     .msg_controllen = sizeof cm.b};
	struct pollfd pf = {.fd = s, .events = POLLIN};
	ssize_t n = -1;
	if (dfd >= 0 && s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0 &&
	    poll(&pf, 1, ASK_TIMEOUT_MS) == 1)
		n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
	for (struct cmsghdr *h = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL; h; h = CMSG_NXTHDR(&msg, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
		    h->cmsg_len == CMSG_LEN(2 * sizeof(int))) {
			memcpy(fuse, CMSG_DATA(h), sizeof(int));
			memcpy(envfd, CMSG_DATA(h) + sizeof(int), sizeof(int));
		}
	unsigned long len = 0;
	char *body = NULL;
	if (n > 0 && *fuse >= 0) {
		buf[n] = '\0';
		char *nl = memchr(buf, '\n', (size_t)n);
		if (nl && sscanf(buf, "STGENV1 %64s %lu", digest, &len) == 2 &&
		    strlen(digest) == STG_DIGEST_HEXLEN && len > 0 &&
		    len == (unsigned long)(n - (nl + 1 - buf)))
			body = nl + 1;
	}
	if (body && (*init = malloc(len))) {
		memcpy(*init, body, len);
		*init_len = len;
		err = STG_OK;
	}
	if (err) {
		if (*fuse >= 0)
			close(*fuse);
		if (*envfd >= 0)
			close(*envfd);
		*fuse = *envfd = -1;
		stg__fail(ctx, STG_EIO, "the server of '%s' (%s) did not answer", sh->mountpoint,
		          owner);
	}
	if (s >= 0)
		close(s);
	if (dfd >= 0)
		close(dfd);
	return err;
}

/* Answer those that join: the same user's alone. */
static void *listen_thread(void *arg)
{
	stg_share *sh = arg;
	stg_mount *m = sh->m;
	char head[96];
	int hl = snprintf(head, sizeof head, "STGENV1 %s %zu\n", m->packs[0].digest, m->init_len);
	char *msgbuf = malloc((size_t)hl + m->init_len);
	if (!msgbuf)
		return NULL;
	memcpy(msgbuf, head, (size_t)hl);
	memcpy(msgbuf + hl, m->init, m->init_len);
	struct pollfd pf[2] = {{.fd = sh->sock, .events = POLLIN},
	                       {.fd = sh->wake[0], .events = POLLIN}};
	for (;;) {
		int r = poll(pf, 2, -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || pf[1].revents)
			break;
		int c = accept4(sh->sock, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		struct ucred cr;
		socklen_t cl = sizeof cr;
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 && cr.uid == geteuid()) {
			int fds[2] = {stg__mount_fd(m), sh->envfd};
			union {
				struct cmsghdr h;
				char b[CMSG_SPACE(sizeof fds)];
			} cm;
			memset(&cm, 0, sizeof cm);
			struct iovec iov = {msgbuf, (size_t)hl + m->init_len};
			struct msghdr msg = {.msg_iov = &iov,
			                     .msg_iovlen = 1,
			                     .msg_control = cm.b,
			                     .msg_controllen = sizeof cm.b};
			struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
			h->cmsg_level = SOL_SOCKET;
			h->cmsg_type = SCM_RIGHTS;
			h->cmsg_len = CMSG_LEN(sizeof fds);
			memcpy(CMSG_DATA(h), fds, sizeof fds);
			(void)!sendmsg(c, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		close(c);
	}
	free(msgbuf);
	return NULL;
}

static void listen_start(stg_share *sh, stg_mount *m)
{
	int dfd = mounts_dir(sh->cache);
	char name[64];
	sock_name(m->owner, name, sizeof name);
	struct sockaddr_un a;
	sock_addr(dfd, name, &a);
	sh->m = m;
	if (dfd >= 0)
		unlinkat(dfd, name, 0);
	sh->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (dfd < 0 || sh->sock < 0 || bind(sh->sock, (struct sockaddr *)&a, sizeof a) ||
	    listen(sh->sock, 16) || pipe2(sh->wake, O_CLOEXEC)) {
		stg__mount_log(m, STG_LOG_WARN,
		               "cannot listen for other servers of '%s' (%s): jobs that start "
		               "while this one serves it serve it alone",
		               sh->mountpoint, strerror(errno));
	} else {
		sigset_t all, was;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &was);
		sh->listening = pthread_create(&sh->t, NULL, listen_thread, sh) == 0;
		pthread_sigmask(SIG_SETMASK, &was, NULL);
	}
	if (dfd >= 0)
		close(dfd);
}

static void listen_stop(stg_share *sh)
{
	if (sh->listening) {
		(void)!write(sh->wake[1], "", 1);
		pthread_join(sh->t, NULL);
		sh->listening = false;
	}
	for (int i = 0; i < 2; i++)
		if (sh->wake[i] >= 0)
			close(sh->wake[i]);
	sh->wake[0] = sh->wake[1] = -1;
	if (sh->sock >= 0) {
		close(sh->sock);
		sh->sock = -1;
		int dfd = mounts_dir(sh->cache);
		char name[64];
		sock_name(sh->m->owner, name, sizeof name);
		if (dfd >= 0) {
			unlinkat(dfd, name, 0);
			close(dfd);
		}
	}
}

/* The mountpoint with no live server: a dead mount of ours there (its
 * server killed) unmounted, then the env's directory itself opened. */
static stg_err open_bare(stg_ctx *ctx, stg_share *sh)
{
	if (stg__is_stager_mount(sh->mountpoint, getuid()) && stg__unmount_path(sh->mountpoint))
		return stg__fail_errno(ctx, STG_EIO, errno,
		                       "'%s' is a stager mount nothing serves, and it cannot be "
		                       "unmounted",
		                       sh->mountpoint);
	if (sh->envfd >= 0)
		close(sh->envfd);
	sh->envfd = open(sh->mountpoint, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sh->envfd < 0)
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot open '%s'", sh->mountpoint);
	return STG_OK;
}

static int lock_share(stg_ctx *ctx, stg_share *sh)
{
	int fd = stg__cache_lock(ctx, sh->cache, sh->lock, true, NULL);
	if (fd < 0)
		stg__fail_errno(ctx, stg__cancelled(ctx) ? STG_EINTR : STG_EIO, errno,
		                "cannot lock '%s' in the node cache", sh->lock);
	return fd;
}

stg_err stg__share_look(stg_ctx *ctx, stg_share *sh, char digest[STG_DIGEST_HEXLEN + 1])
{
	digest[0] = '\0';
	int lk = lock_share(ctx, sh);
	if (lk < 0)
		return stg__cancelled(ctx) ? STG_EINTR : STG_EIO;
	stg_env_server v[MAX_SERVERS];
	size_t n = stg__env_servers(sh->cache, sh->mountpoint, sh->ns, NULL, v, MAX_SERVERS);
	stg_err err = n ? STG_EIO : open_bare(ctx, sh);
	for (size_t i = 0; i < n && err; i++) {
		int fuse, envfd;
		uint8_t *init = NULL;
		size_t len;
		char d[STG_DIGEST_HEXLEN + 1];
		if (ask(ctx, sh, v[i].owner, &fuse, &envfd, &init, &len, d))
			continue;
		close(fuse);
		free(init);
		if (sh->envfd >= 0)
			close(sh->envfd);
		sh->envfd = envfd;
		memcpy(digest, d, sizeof d);
		err = STG_OK;
	}
	stg__cache_unlock(lk);
	return err;
}

/* Join the live server owner's session: a FUSE device of our own, a clone
 * of its. */
static stg_err join(stg_ctx *ctx, stg_share *sh, stg_mount *m, const stg_env_server *s)
{
	int fuse, envfd;
	uint8_t *init = NULL;
	size_t len = 0;
	char d[STG_DIGEST_HEXLEN + 1];
	stg_err err = ask(ctx, sh, s->owner, &fuse, &envfd, &init, &len, d);
	if (err)
		return err;
	close(envfd);
	int mine = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	uint32_t from = (uint32_t)fuse;
	if (mine < 0 || ioctl(mine, FUSE_DEV_IOC_CLONE, &from)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot join the FUSE session of '%s'",
		                      sh->mountpoint);
		if (mine >= 0)
			close(mine);
		mine = -1;
	}
	close(fuse);
	if (!err) {
		free(m->init);
		m->init = init;
		m->init_len = len;
		init = NULL;
		err = stg__mount_session(ctx, m, sh->mountpoint, mine);
		if (err)
			close(mine);
	}
	free(init);
	return err;
}

stg_err stg__share_start(stg_ctx *ctx, stg_share *sh, stg_mount *m)
{
	int lk = lock_share(ctx, sh);
	if (lk < 0)
		return stg__cancelled(ctx) ? STG_EINTR : STG_EIO;
	m->share = sh;
	sh->m = m;
	stg_env_server v[MAX_SERVERS];
	size_t n = stg__env_servers(sh->cache, sh->mountpoint, sh->ns, NULL, v, MAX_SERVERS);
	stg_err err = STG_EIO;
	size_t same = 0;
	for (size_t i = 0; i < n && err; i++)
		if (!strcmp(v[i].digest, m->packs[0].digest)) {
			same++;
			err = join(ctx, sh, m, &v[i]);
		}
	if (!n && !(err = open_bare(ctx, sh))) {
		err = stg__mount_session(ctx, m, sh->mountpoint, -1);
	} else if (n && !same) {
		/* one path shows one version: another one's processes may
		 * hold its files */
		err = stg__fail(ctx, STG_EIO,
		                "'%s' is served on this node from another version of its pack "
		                "(%.12s, by %s %s): this version can be served here once that "
		                "ends; run on another node meanwhile (sbatch --exclude=%s)",
		                sh->mountpoint, v[0].digest, v[0].job[0] ? "job" : "process",
		                v[0].job[0] ? v[0].job : v[0].owner,
		                getenv("SLURMD_NODENAME") ? getenv("SLURMD_NODENAME") : "NODE");
	}
	if (!err) {
		stg__mount_record_write(m);
		listen_start(sh, m);
	} else {
		m->share = NULL; /* not the mount's: its caller frees it */
	}
	stg__cache_unlock(lk);
	return err;
}

void stg__share_leave(stg_share *sh, stg_mount *m)
{
	stg_ctx *ctx = stg_ctx_new();
	int lk = ctx ? lock_share(ctx, sh) : -1;
	listen_stop(sh);
	stg_env_server v[1];
	bool last = stg__env_servers(sh->cache, sh->mountpoint, sh->ns, m->owner, v, 1) == 0;
	/* unmounted before the record goes: a server killed in between (a
	 * job's KillWait over) leaves its record, by which clean (the
	 * epilog's) finds the mount and unmounts it */
	if (last) {
		if (m->mounted)
			stg__mount_unmount(m);
		else if (stg__is_stager_mount(sh->mountpoint, getuid()))
			stg__unmount_path(sh->mountpoint);
	}
	stg__mount_record_remove(m);
	m->mounted = false; /* the others' now */
	stg__cache_unlock(lk);
	stg_ctx_free(ctx);
}

void stg__share_free(stg_share *sh)
{
	if (!sh)
		return;
	if (sh->envfd >= 0)
		close(sh->envfd);
	free(sh);
}
