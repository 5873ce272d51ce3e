/*
 * ut_collect.h - what the tests of collect's parts (collect.h) share.
 */
#ifndef STG_UT_COLLECT_H
#define STG_UT_COLLECT_H

#include "unit.h"
#include "collect_record.h"
#include "collect_send.h"

/* Free a collector the test made by hand: its open files, records,
 * maps and pending names. */
static inline void ut_collector_free(collector *k)
{
	if (k->srcfd >= 0)
		close(k->srcfd);
	if (k->destfd >= 0)
		close(k->destfd);
	if (k->logfd >= 0)
		close(k->logfd);
	stg__col_recs_clear(k);
	free(k->recs);
	stg__strmap_free(&k->map);
	stg__strmap_free(&k->dirs);
	for (size_t i = 0; i < k->n_pending; i++)
		free(k->pending[i]);
	free(k->pending);
	free(k);
}

#endif
