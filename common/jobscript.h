/*
 * jobscript.h - the one rule a batch script must meet to be accepted as a job.
 *
 * Guarantees:
 *   - One rule, one place: the server (raftd/api.c, before a submission reaches the
 *     state machine) and sbatch (before it sends anything) both call jobscript_check(),
 *     so a script a raw client sends is refused with the very message sbatch prints.
 *   - The rule, in order: not empty; no NUL byte; not only whitespace; the first line
 *     starts with "#!" (an interpreter to run it with, as Slurm's sbatch requires); no
 *     DOS line breaks ("\r\n"; a lone "\r" is fine). The size limit is not part of it:
 *     that one is replicated (controller.max_script_bytes) and the state machine
 *     enforces it.
 *   - Pure: no I/O, no allocation; the message is one line without a newline.
 */
#ifndef SPUR_JOBSCRIPT_H
#define SPUR_JOBSCRIPT_H

#include <stddef.h>

/* Returns 0 when script (len bytes, not NUL-terminated) meets the rule, else -1 with err. */
int jobscript_check(const char *script, size_t len, char *err, size_t errlen);

#endif
