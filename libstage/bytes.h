/*
 * bytes.h - little-endian fixed-width access and saturating sizes:
 * inline, no .c.
 */
#ifndef STG_BYTES_H
#define STG_BYTES_H

#include <stdint.h>

/* Little-endian fixed-width access. */
static inline uint32_t stg__get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t stg__get64(const uint8_t *p)
{
	return (uint64_t)stg__get32(p) | (uint64_t)stg__get32(p + 4) << 32;
}
static inline void stg__put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}
static inline void stg__put64(uint8_t *p, uint64_t v)
{
	stg__put32(p, (uint32_t)v);
	stg__put32(p + 4, (uint32_t)(v >> 32));
}

/* a + b, or UINT64_MAX past it: sizes that a peer or an archive declares
 * are added so, never wrapped (two files of 2^63 bytes are not 0 bytes). */
static inline uint64_t stg__sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

#endif
