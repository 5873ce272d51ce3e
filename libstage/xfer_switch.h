/*
 * xfer_switch.h - the receiving end's entry points (xfer_switch.c): may a
 * tree be received at DEST, and the receive itself.
 */
#ifndef STG_XFER_SWITCH_H
#define STG_XFER_SWITCH_H

#include "proto.h"

/* Receive a tree into dest, or with pack a pack at dest.tar.zst
 * (xfer_switch.c): verified, then switched in; then PUBLISHED.  An existing
 * dest is replaced only as stg__receive_check allows. */
stg_err stg__receive_tree(stg_ctx *ctx, stg_wire *w, const char *dest, bool pack, bool replace,
                          bool checksum, const char *what, stg_xfer_result *res);
/* Before anything is sent: may a tree be received at dest?  STG_EEXIST
 * (with what to do) if dest is a directory that stager did not publish
 * and is not empty (unless replace), or a home directory (always), or
 * not a directory; the receiver checks again under its lock. */
stg_err stg__receive_check(stg_ctx *ctx, const char *dest, bool pack, bool replace,
                           const char *what);

#endif
