/*
 * replay.c - run a fuzz target over corpus files without libFuzzer, so the
 * ordinary test suite (and its sanitizer builds) replays the corpus.
 * Usage: replay_NAME FILE...   Prints a TAP line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
	int n = 0;
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) {
			printf("not ok - cannot open %s\n", argv[i]);
			return 1;
		}
		fseek(f, 0, SEEK_END);
		long len = ftell(f);
		fseek(f, 0, SEEK_SET);
		uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
		if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
			printf("not ok - cannot read %s\n", argv[i]);
			return 1;
		}
		fclose(f);
		LLVMFuzzerTestOneInput(buf, (size_t)len);
		free(buf);
		n++;
	}
	/* reaching here means no input crashed (a sanitizer aborts otherwise) */
	printf("ok - %s: %d corpus inputs replayed\n", argv[0], n);
	return 0;
}
