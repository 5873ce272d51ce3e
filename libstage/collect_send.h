/*
 * collect_send.h - the shared filesystem side of a collect
 * (collect_send.c): temporaries, the hashed and flushed copy, rename,
 * retries, DEST's marker.
 */
#ifndef STG_COLLECT_SEND_H
#define STG_COLLECT_SEND_H

#include "collect_state.h"
#include "walk.h"

int stg__col_current_umask(void);
void stg__col_failed(collector *k, const char *path, const char *where, int e);
void stg__col_mark_begin(collector *k, char *mark, size_t len);
void stg__col_mark_end(collector *k, const char *mark);
void stg__col_op(collector *k);
void stg__col_remember(collector *k, crec *r, const char *path);
void stg__col_remove_leftovers(collector *k);
bool stg__col_send_item(collector *k, const stg_witem *it, const char *final, const char *shown,
                        crec *out);
double stg__col_slot_deadline(const stg_collect_opts *o);

#endif
