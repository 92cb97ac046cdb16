/*
 * units.h - the small value forms the commands print: durations, time limits,
 * timestamps and memory sizes, the way Slurm prints them (scripts parse these).
 *
 * Guarantees:
 *   - squeue's durations are M:SS, H:MM:SS, D-HH:MM:SS; scontrol's HH:MM:SS, D-HH:MM:SS.
 *   - Timestamps are local ISO 8601 without a zone (2026-01-31T12:00:00); 0 prints the
 *     caller's "none" word.
 *   - Memory is in megabytes as Slurm prints it: 512M, 4G, 2T (exact multiples only), 0.
 *   - Every function writes a NUL-terminated string of at most len bytes into buf (the
 *     caller's); nothing reads the clock or allocates.
 */
#ifndef SPUR_UNITS_H
#define SPUR_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* squeue's elapsed form: M:SS, H:MM:SS, D-HH:MM:SS. */
void units_duration(char *buf, size_t len, uint64_t secs);
/* scontrol's: HH:MM:SS, D-HH:MM:SS. */
void units_duration_hms(char *buf, size_t len, uint64_t secs);
/* A limit in minutes (hms: scontrol's form); 0 prints unlimited ("UNLIMITED", "infinite"). */
void units_limit(char *buf, size_t len, uint32_t minutes, const char *unlimited, bool hms);
/* Local time "YYYY-MM-DDTHH:MM:SS"; 0 prints none. */
void units_timestamp(char *buf, size_t len, uint64_t ms, const char *none);
/* Megabytes the way Slurm prints memory: 512M, 4G, 2T (exact multiples), 0. */
void units_mem(char *buf, size_t len, uint64_t mb);

#endif
