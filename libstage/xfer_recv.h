/*
 * xfer_recv.h - the steps of a receive (xfer_recv.c): the manifest, what
 * is there, what to ask for, the final check; what the steps share.
 */
#ifndef STG_XFER_RECV_H
#define STG_XFER_RECV_H

#include "xfer_recv_state.h"

/* The steps of a receive (xfer_recv.c), in order, driven by
 * stg__receive_tree (xfer_switch.c). */
stg_err stg__recv_read_manifest(receiver *rc);
stg_err stg__recv_resume_names_init(receiver *rc);
stg_err stg__recv_clean_partial(receiver *rc);
stg_err stg__recv_plan(receiver *rc, stg_xfer_result *res);
stg_err stg__recv_links_and_verify(receiver *rc);

/* Shared by the steps: a new temporary name in the partial root; fd's
 * metadata set and tmp renamed to e's path; a path the peer sent, escaped
 * for a message (in rc->sh, until the next call). */
void stg__recv_tmp_name(receiver *rc, char *out, size_t len);
stg_err stg__recv_finish_file(receiver *rc, int fd, const char *tmp, const stg_wentry *e);
const char *stg__recv_shown(receiver *rc, const char *path);
/* Open path beneath root to read only if it is a regular file: never a
 * FIFO or a device someone put there (O_NONBLOCK, checked on the opened
 * descriptor).  -1/errno (EINVAL: not a regular file); *st filled. */
int stg__recv_open_file(int root, const char *path, struct stat *st);

#endif
