/*
 * gravity.h - Slurm node features for cached packs (gravity.c): their
 * names, sinfo's output, the choice of what a node advertises.
 */
#ifndef STG_GRAVITY_H
#define STG_GRAVITY_H

#include "libstage.h"

#include <stddef.h>
#include <stdint.h>

#define STG_FEATURE_PREFIX "stg_"

typedef char stg_feature_name[STG_FEATURE_LEN + 1];

/* Is name (len bytes) a feature of stager's (one the site did not set)? */
int stg__feature_ours(const char *name, size_t len);
/* The nodes of `sinfo -h -N -o '%N|%f'` output that have feature, comma
 * separated, each once, into out (cut short rather than overrun);
 * returns how many. */
size_t stg__nodes_with(const char *sinfo, const char *feature, char *out, size_t out_len);
/* The same, less the nodes that also have leaving (NULL: none). */
size_t stg__nodes_staying(const char *sinfo, const char *feature, const char *leaving, char *out,
                          size_t out_len);
/* The marker a node has beside a feature of stager's that is leaving (in
 * its grace): "stg_" and 12 hex digits of SHA-256("stager-leaving",
 * feature), so that stg_where does not name that node and no hint names
 * a feature that may be gone before its sbatch. */
void stg__feature_leaving(const char *feature, char out[STG_FEATURE_LEN + 1]);

/* The whole packs info's cache holds (kind "pack": not a directory's or
 * a plain archive's entry): at most max keys (their digests,
 * pointing into info), most recently used first, and their last use
 * (last_use may be NULL); returns how many. */
size_t stg__cache_packs(const stg_cache_info *info, size_t max, const char **keys,
                        int64_t *last_use);

/* One feature in a node's record (node_features.c keeps it as root). */
typedef struct stg_feat_ent {
	unsigned uid; /* whose; STG_FEAT_NOBODY: advertised, owner unknown */
	stg_feature_name name;
	int64_t last_use;  /* the pack's last use in that user's cache */
	int live;          /* that user's cache held it at their last update */
	int64_t out_since; /* advertised but no longer wanted since (0: not) */
} stg_feat_ent;
#define STG_FEAT_NOBODY 0xffffffffu

/*
 * What a node advertises, from its record v[*n] (a user's newest list
 * already merged in) and what it advertises now (adv[n_adv], stager's
 * features only).  Wanted are max live features, shared fairly among
 * the users who have live ones: each user's most recently used first,
 * round robin (within a round by recency), so that each of U users gets
 * at least max / U (rounded down) while they have that many, and what a
 * user does not fill goes to the others.
 * A feature advertised but no longer wanted stays for grace seconds from
 * when it stopped being wanted (out_since), so that a hint printed a
 * moment ago never names a feature that no node has; it holds its place
 * under the cap meanwhile, and a newly wanted feature waits for a free
 * place.  Each feature in its grace also gets its leaving marker; the
 * markers among adv are no features of packs (made anew each time).
 * chosen[] (room for max + 2 * n_adv) receives the features to
 * advertise, sorted; returns how many.  Entries neither live nor chosen
 * are dropped from v (*n shrinks); an advertised feature the record does
 * not know is added to it as STG_FEAT_NOBODY's, out since now.
 */
size_t stg__features_plan(stg_feat_ent *v, size_t *n, size_t cap, const stg_feature_name *adv,
                          size_t n_adv, int64_t now, size_t max, int64_t grace,
                          stg_feature_name *chosen);

/* One line of a node's record, "UID FEATURE LAST_USE LIVE OUT_SINCE",
 * into e; 0 if it is not one. */
int stg__feat_ent_parse(const char *line, stg_feat_ent *e);

/* Merge user uid's list (len bytes of "DIGEST LAST_USE" lines, hostile:
 * each line checked, at most max taken; a whole list ends with a line
 * "end") into the record v[*n] (room for cap): the features of those
 * packs for uid - computed here, so a user names only their own - live
 * with their last use (at most now); the user's others no longer, but
 * only when the list is whole (a user's side that failed or was stopped
 * takes nothing away).  Returns how many lines were not one. */
size_t stg__features_merge(stg_feat_ent *v, size_t *n, size_t cap, unsigned uid, const char *list,
                           size_t len, size_t max, int64_t now);

/* Split a comma-separated feature list (Slurm's "(null)" is none): calls
 * fn for each name; returns how many. */
size_t stg__features_each(const char *list, size_t len,
                          void (*fn)(void *arg, const char *name, size_t len), void *arg);

#endif
