/*
 * jobscript.c - the batch script rule; contract in jobscript.h.
 *
 * The messages are Slurm's own where Slurm has one, so that people who know sbatch
 * recognise them.
 */
#include "jobscript.h"

#include <stdio.h>
#include <string.h>

static int refuse(char *err, size_t errlen, const char *msg)
{
    if (errlen > 0)
        snprintf(err, errlen, "%s", msg);
    return -1;
}

static int is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r';
}

int jobscript_check(const char *script, size_t len, char *err, size_t errlen)
{
    if (script == NULL || len == 0)
        return refuse(err, errlen, "Batch script is empty!");
    const char *nul = memchr(script, '\0', len);
    if (nul != NULL) {
        if (errlen > 0)
            snprintf(err, errlen, "Batch script contains a NUL character at byte %zu",
                     (size_t)(nul - script));
        return -1;
    }
    size_t i = 0;
    while (i < len && is_space(script[i]))
        i++;
    if (i == len)
        return refuse(err, errlen, "Batch script contains only whitespace!");
    if (len < 2 || script[0] != '#' || script[1] != '!')
        return refuse(err, errlen,
                      "This does not look like a batch script. The first line must start with "
                      "#! followed by the path to an interpreter. For instance: #!/bin/sh");
    for (size_t k = 0; k + 1 < len; k++)
        if (script[k] == '\r' && script[k + 1] == '\n')
            return refuse(err, errlen,
                          "Batch script contains DOS line breaks (\\r\\n) instead of expected "
                          "UNIX line breaks (\\n)");
    return 0;
}
