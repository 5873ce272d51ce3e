/*
 * xfer_recv_file.h - the receiving end's files as they arrive
 * (xfer_recv_file.c): written, checked, renamed.
 */
#ifndef STG_XFER_RECV_FILE_H
#define STG_XFER_RECV_FILE_H

#include "xfer_recv_state.h"

/* One FILE frame and what follows it, up to FILE_END. */
stg_err stg__recv_receive_file(receiver *rc, const uint8_t *p, uint32_t len);

#endif
