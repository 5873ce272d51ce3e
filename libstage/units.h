/*
 * units.h - sizes and percentages as text (units.c).
 */
#ifndef STG_UNITS_H
#define STG_UNITS_H

#include "libstage.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* A size ("10G") or percentage ("5%" of whole) in bytes. */
uint64_t stg__bytes_setting(const char *v, uint64_t whole);

#endif
