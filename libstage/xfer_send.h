/*
 * xfer_send.h - the sending end of a transfer (xfer_send.c).
 */
#ifndef STG_XFER_SEND_H
#define STG_XFER_SEND_H

#include "proto.h"

/* Send the tree at dir (xfer_send.c): manifest, then what the receiver
 * asks for; returns when the receiver said PUBLISHED.  index_dir: where
 * the index of what was read is kept (NULL: none); checksum: read every
 * file whatever the index says. */
stg_err stg__send_tree(stg_ctx *ctx, stg_wire *w, const char *dir, const char *what,
                       const char *index_dir, bool checksum, stg_xfer_result *res);

#endif
