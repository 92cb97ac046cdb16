/*
 * units.c - durations, limits, timestamps and memory sizes as text; see units.h.
 */
#include "units.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

void units_duration(char *buf, size_t len, uint64_t secs)
{
    uint64_t d = secs / 86400, h = secs / 3600 % 24, m = secs / 60 % 60, s = secs % 60;
    if (d > 0)
        snprintf(buf, len, "%" PRIu64 "-%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, d, h, m, s);
    else if (h > 0)
        snprintf(buf, len, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64, h, m, s);
    else
        snprintf(buf, len, "%" PRIu64 ":%02" PRIu64, m, s);
}

void units_duration_hms(char *buf, size_t len, uint64_t secs)
{
    uint64_t d = secs / 86400, h = secs / 3600 % 24, m = secs / 60 % 60, s = secs % 60;
    if (d > 0)
        snprintf(buf, len, "%" PRIu64 "-%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, d, h, m, s);
    else
        snprintf(buf, len, "%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, h, m, s);
}

void units_limit(char *buf, size_t len, uint32_t minutes, const char *unlimited, bool hms)
{
    if (minutes == 0)
        snprintf(buf, len, "%s", unlimited);
    else if (hms)
        units_duration_hms(buf, len, (uint64_t)minutes * 60);
    else
        units_duration(buf, len, (uint64_t)minutes * 60);
}

void units_timestamp(char *buf, size_t len, uint64_t ms, const char *none)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms == 0 || localtime_r(&t, &tm) == NULL ||
        strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        snprintf(buf, len, "%s", none);
}

void units_mem(char *buf, size_t len, uint64_t mb)
{
    if (mb == 0)
        snprintf(buf, len, "0");
    else if (mb % (1024 * 1024) == 0)
        snprintf(buf, len, "%" PRIu64 "T", mb / (1024 * 1024));
    else if (mb % 1024 == 0)
        snprintf(buf, len, "%" PRIu64 "G", mb / 1024);
    else
        snprintf(buf, len, "%" PRIu64 "M", mb);
}
