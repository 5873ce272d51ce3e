/*
 * collect_record.h - collect's record on scratch of what DEST holds from
 * SRC (collect_record.c): its name, its lines, kept in memory and on disk;
 * carried over to a kept path.
 */
#ifndef STG_COLLECT_RECORD_H
#define STG_COLLECT_RECORD_H

#include "collect_state.h"
#include "path.h"

/* SRC and DEST as the record knows them (absolute, DEST.tar.zst for a
 * pack), and the record's id; -1 if a path is too long. */
int stg__col_names(const char *src, const char *dest, bool pack, char asrc[STG_PATH_MAX + 1],
                   char adest[STG_PATH_MAX + 1], char id[17]);
int stg__col_log_line(collector *k, const char *head, const char *path);
int stg__col_log_rec(collector *k, const crec *r);
crec *stg__col_rec_find(collector *k, const char *path);
crec *stg__col_rec_set(collector *k, crec *r);
void stg__col_record_compact(collector *k);
stg_err stg__col_record_open(collector *k);
void stg__col_recs_clear(collector *k);

/* src's record made to_'s (results moved to kept/ keep what their
 * collects sent): 0, or -1/errno. */
int stg__collect_record_move(stg_cache *c, const char *src, const char *dest, bool pack,
                             const char *to);

#endif
