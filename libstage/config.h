/*
 * config.h - settings read as numbers (config.c).
 */
#ifndef STG_CONFIG_H
#define STG_CONFIG_H

#include "libstage.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* A size or percentage setting in bytes; whole is what 100% means. */
uint64_t stg__config_bytes(const stg_config *c, const char *key, uint64_t whole);
long stg__config_count(const stg_config *c, const char *key);

#endif
