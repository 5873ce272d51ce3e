/*
 * writer.h - a large file written by threads of its own (writer.c).
 */
#ifndef STG_WRITER_H
#define STG_WRITER_H

#include "ctx.h"

typedef struct stg_writer stg_writer;

/* threads writing pieces of buf_size bytes (a few pieces in flight); NULL
 * when out of memory or no thread starts. */
stg_writer *stg__writer_new(int threads, size_t buf_size);
void stg__writer_free(stg_writer *w);
/* Write to fd from offset 0: bytes appended with stg__writer_put go to the
 * next offsets, written as whole pieces fill up, in any order. */
void stg__writer_begin(stg_writer *w, int fd);
/* Append n bytes (copied); -1/errno if a write failed already. */
int stg__writer_put(stg_writer *w, const uint8_t *p, size_t n);
/* Or fill the writer's own buffer, with no copy: room for *n (> 0) bytes
 * to append (NULL/errno if a write failed already), then commit the k <=
 * *n bytes put there. */
uint8_t *stg__writer_room(stg_writer *w, size_t *n);
int stg__writer_commit(stg_writer *w, size_t k);
/* Write what is left and wait for every write of the file; 0, or -1 with
 * the errno of the first write that failed. */
int stg__writer_end(stg_writer *w);

#endif
