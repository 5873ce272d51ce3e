/*
 * cmd_diff.c - stager diff OLD NEW [--json]: what changed between two packs,
 * from their trailers (one read at the end of each).
 *
 * Text: one line per difference on stdout, "A path", "D path" or
 * "M path (content, mode, ...)", and a summary on stderr.
 */
#include "cli.h"

#include <string.h>

enum { OPT_JSON = OPT_FIRST_LOCAL };

typedef struct diff_out {
	bool json;
	unsigned n[3]; /* printed per kind, for JSON commas */
} diff_out;

static void what_list(FILE *f, unsigned what, bool json)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {{STG_DIFF_CONTENT, "content"},
	             {STG_DIFF_MODE, "mode"},
	             {STG_DIFF_TYPE, "type"},
	             {STG_DIFF_LINK, "link"}};
	bool first = true;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		if (!(what & names[i].bit))
			continue;
		fprintf(f, json ? "%s\"%s\"" : "%s%s", first ? "" : ", ", names[i].name);
		first = false;
	}
}

/* Text lines as they come. */
static void on_text(void *arg, stg_diff_kind kind, unsigned what, const stg_entry *old,
                    const stg_entry *new_)
{
	(void)arg;
	const stg_entry *e = new_ ? new_ : old;
	bool dir = e->type == STG_DIR;
	printf("%c ", kind == STG_DIFF_CHANGED ? 'M' : kind == STG_DIFF_ADDED ? 'A' : 'D');
	cli_put_name(stdout, e->path);
	fputs(dir ? "/" : "", stdout);
	if (kind == STG_DIFF_CHANGED) {
		printf(" (");
		what_list(stdout, what, false);
		printf(")");
	}
	putchar('\n');
}

/* JSON: three passes, one per kind, so each array is contiguous. */
typedef struct json_pass {
	stg_diff_kind kind;
	unsigned n;
} json_pass;

static void on_json(void *arg, stg_diff_kind kind, unsigned what, const stg_entry *old,
                    const stg_entry *new_)
{
	json_pass *p = arg;
	if (kind != p->kind)
		return;
	const stg_entry *e = new_ ? new_ : old;
	printf("%s{\"path\":", p->n++ ? "," : "");
	json_str(stdout, e->path);
	if (e->type == STG_FILE)
		printf(",\"size\":%llu", (unsigned long long)e->size);
	if (kind == STG_DIFF_CHANGED) {
		if (old->type == STG_FILE)
			printf(",\"old_size\":%llu", (unsigned long long)old->size);
		printf(",\"what\":[");
		what_list(stdout, what, true);
		printf("]");
	}
	printf("}");
}

int cmd_diff(int argc, char **argv)
{
	static const struct option lo[] = {
	        {"json", no_argument, NULL, OPT_JSON},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	bool json = false;
	int c, rc;
	while ((c = getopt_long(argc, argv, "hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		if (c == OPT_JSON)
			json = true;
		else
			return cli_usage("unexpected option");
	}
	if (argc - optind != 2)
		return cli_usage("which packs? stager diff OLD NEW");
	if ((rc = cli_check_globals()))
		return rc;
	stg_ctx *ctx = cli_ctx();
	stg_pack *a = NULL, *b = NULL;
	stg_err err = stg_pack_open(ctx, argv[optind], &a);
	if (!err)
		err = stg_pack_open(ctx, argv[optind + 1], &b);
	stg_diff_stats st;
	if (!err && !json) {
		err = stg_diff(ctx, a, b, on_text, NULL, &st);
	} else if (!err) {
		stg_pack_info ia, ib;
		stg_pack_get_info(a, &ia);
		stg_pack_get_info(b, &ib);
		printf("{\"old\":");
		json_hex(stdout, ia.digest, STG_DIGEST_LEN);
		printf(",\"new\":");
		json_hex(stdout, ib.digest, STG_DIGEST_LEN);
		static const char *const names[] = {"added", "removed", "changed"};
		stg_diff_kind kinds[] = {STG_DIFF_ADDED, STG_DIFF_REMOVED, STG_DIFF_CHANGED};
		for (int k = 0; k < 3 && !err; k++) {
			json_pass p = {.kind = kinds[k]};
			printf(",\"%s\":[", names[k]);
			err = stg_diff(ctx, a, b, on_json, &p, &st);
			printf("]");
		}
		printf(",\"unchanged\":%llu,\"added_bytes\":%llu,\"removed_bytes\":%llu,"
		       "\"changed_bytes\":%llu}\n",
		       (unsigned long long)st.unchanged, (unsigned long long)st.added_bytes,
		       (unsigned long long)st.removed_bytes, (unsigned long long)st.changed_bytes);
	}
	if (err) {
		rc = cli_fail(ctx, err);
	} else {
		char x[16], y[16], z[16];
		cli_info(
		        "%llu added (%s), %llu removed (%s), %llu changed (%s now); %llu unchanged",
		        (unsigned long long)st.added, stg_format_size(st.added_bytes, x, sizeof x),
		        (unsigned long long)st.removed,
		        stg_format_size(st.removed_bytes, y, sizeof y),
		        (unsigned long long)st.changed,
		        stg_format_size(st.changed_bytes, z, sizeof z),
		        (unsigned long long)st.unchanged);
		rc = EXIT_OK;
	}
	stg_pack_close(a);
	stg_pack_close(b);
	cli_ctx_done(ctx);
	return rc;
}
