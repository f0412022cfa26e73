/* tools/common_output.h - writing a tool's output file (-o FILE) so that
 * readers never see a partial file and failures are always reported.
 * Linked into every tool (tools/common_*.c).
 *
 * A regular file (or a new path) is written to a fresh temporary created
 * with mkstemp next to it (O_EXCL: never through a link planted there),
 * synced and renamed over FILE only when the tool commits; two runs
 * writing the same FILE each rename a whole file, the last one wins. A
 * symbolic link to a regular file keeps pointing where it did: the file
 * it resolves to is the one replaced. A path that is not a regular file
 * (/dev/null, /dev/stdout, /dev/full, a FIFO) is written in place, since
 * renaming over it would replace the device node itself. "-" is stdout.
 * Every open, write, sync, close and rename error is reported on stderr
 * as "TOOL: error: ... 'PATH': strerror" and makes the close fail. */
#ifndef FZ_TOOLS_COMMON_OUTPUT_H
#define FZ_TOOLS_COMMON_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include "fz/ir.h"

typedef struct FzToolOutput {
  const char *tool; /* message prefix, e.g. "fuse-opt" */
  const char *path; /* as given on the command line; "-" for stdout */
  char *target;     /* the file renamed over (path, or a link's target) */
  char *tmpPath;    /* the temporary; NULL when written in place */
  FILE *file;       /* where output goes */
  int writeErrno;   /* errno of the first failed write, 0 if none */
} FzToolOutput;

/* Opens the output for path; false after reporting why. On success the
 * caller must call fzToolOutputClose. */
bool fzToolOutputOpen(FzToolOutput *out, const char *tool, const char *path);

/* An FzPrintCallback writing to the FzToolOutput in userData; it records
 * the first write error for fzToolOutputClose to report. */
void fzToolOutputWrite(FzStringRef chunk, void *userData);

/* Writes len bytes; false (error recorded) on a short write. */
bool fzToolOutputWriteBytes(FzToolOutput *out, const void *data, size_t len);

/* Finishes the output. With commit, flushes, syncs and renames the
 * temporary over the target; without, removes the temporary (a file
 * written in place keeps what was written). Returns false after
 * reporting any error, including earlier write errors. */
bool fzToolOutputClose(FzToolOutput *out, bool commit);

#endif /* FZ_TOOLS_COMMON_OUTPUT_H */
