/*
 * fsutil.h - filesystem helpers that never follow a link (fsutil.c):
 * trees visited without recursion, beneath-opens, listing, atomic
 * replace, copies, network filesystems, whose a DEST is.
 */
#ifndef STG_FSUTIL_H
#define STG_FSUTIL_H

#include "ctx.h"

#include <sys/types.h>

/* A tree visited without recursion (fsutil.c): entry is called for each
 * entry under dirfd's directory name (dirfd: the directory that holds it,
 * st: its lstat) and answers 1 to go into a directory, 0 not to, -1 to
 * stop (errno set); enter (if set) gets a directory's descriptor before it
 * is listed, leave (if set) is called once what a directory holds was
 * visited (dirfd: its parent); cancel (if set) stops the visit (EINTR).
 * Never through a link; whatever the depth, a frame and a listing a level
 * on the heap and a bounded number of descriptors.  0 or -1/errno. */
struct stat;
typedef struct stg_tvisit {
	int (*entry)(void *arg, int dirfd, const char *name, const struct stat *st);
	int (*enter)(void *arg, int fd, const struct stat *st);
	int (*leave)(void *arg, int dirfd, const char *name);
	bool (*cancel)(void *arg);
	void *arg;
	bool sorted; /* each directory's names in bytewise order */
} stg_tvisit;
int stg__tree_visit(int dirfd, const char *name, const stg_tvisit *v);
/* Remove a tree without following symlinks; 0 or -1/errno. */
int stg__rmtree(const char *path);
int stg__rmtree_at(int dirfd, const char *name);
bool stg__dir_is_empty(int dirfd);
/* The names in directory rel under dirfd ("" or NULL: dirfd itself),
 * without "." and "..", sorted bytewise if asked; rel is opened with
 * O_NOFOLLOW.  0, or -1/errno.  Free with stg__names_free. */
int stg__dir_names(int dirfd, const char *rel, bool sorted, char ***names, size_t *n);
/* Confined access (fsutil.c). */
/* open beneath dirfd: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so
 * no component of path may be a symlink or lead out; O_NOFOLLOW and
 * O_CLOEXEC are added.  -1/errno. */
int stg__open_beneath(int dirfd, const char *path, int flags, mode_t mode);
/* The directory that holds path, opened beneath root; *base is path's last
 * component.  -1/errno. */
int stg__parent_of(int root, const char *path, const char **base);
void stg__names_free(char **names, size_t n);
/* Move the file tmp to path atomically, replacing what is there.  An
 * existing file is swapped out with RENAME_EXCHANGE and unlinked, which
 * spares the synchronous flush ext4 forces on rename-over (auto_da_alloc)
 * unless durable is set.  What cannot be unlinked (a directory) is never
 * replaced: -1/EISDIR, path as it was.  0 or -1/errno. */
int stg__replace(const char *tmp, const char *path, bool durable);
/* Copy size bytes of the file sfd into dfd: a reflink where the
 * filesystem shares blocks, else copy_file_range, else read and write.
 * 0 or -1/errno. */
int stg__copy_file(int sfd, int dfd, uint64_t size);
/* len bytes of sfd at soff into dfd at doff, in the kernel (blocks shared
 * where the filesystem can).  0 done; 1 when the kernel cannot copy
 * between these two (nothing was copied: copy another way); -1/errno, or
 * -1 with errno 0 when sfd ends first. */
int stg__copy_range(int sfd, uint64_t soff, int dfd, uint64_t doff, uint64_t len);
/* Whether the filesystem of device dev (st_dev) is a network one, and its
 * type into type[len], from /proc/self/mountinfo: no call reaches the
 * filesystem (statfs is a round trip on NFS). */
bool stg__dev_is_network(dev_t dev, char *type, size_t len);
/* "NAME (uid N)" of uid into name[len] ("uid N" if it has no name). */
void stg__user_text(uid_t uid, char *name, size_t len);
/* May the user write into a directory at path (there, or made there)?
 * Only into one of the user's, reached through no link of another
 * user's: STG_EEXIST naming the owner, with what to do, if path is
 * another user's directory or link, or would be made in another user's
 * directory (root's are trusted as parents: a sticky /scratch, /home; a
 * group's directory that others cannot write is trusted by its members: a
 * project's shared directory).  Checked on every run; the caller checks
 * the descriptor it then opens too.  file: path is a file or link that is
 * made or replaced there (a pack, a staged link): one of another user's
 * there is refused, and the directory it goes in must be trusted as a
 * parent. */
stg_err stg__dest_ours(stg_ctx *ctx, const char *path, bool file);
/* Bytes a tree takes on disk (blocks), not following links; name
 * relative to dirfd. */
uint64_t stg__tree_bytes(int dirfd, const char *name);
/* Whether fd's filesystem can share blocks between files (a reflink). */
bool stg__fs_shares_blocks(int fd);
/* mkdir -p of the directory that holds path (mode 0777 less the umask). */
int stg__mkdirs_parent(const char *path);
/* mkdir -p of path itself, each directory made with mode; 0 (also if it
 * exists), or -1/errno. */
int stg__mkdirs(const char *path, mode_t mode);
/* path made absolute against the working directory, without asking any
 * filesystem (no realpath: on NFS each component would be a round trip);
 * -1 if it does not fit. */
int stg__absolute(const char *path, char *out, size_t len);

#endif
