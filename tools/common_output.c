/* tools/common_output.c - the tools' output files (see common_output.h):
 * a unique temporary beside the target, renamed over it on success; in
 * place for what is not a regular file; every error reported with the
 * real path and strerror. Owns target and tmpPath until the close. */
/* realpath (XSI) beside the POSIX base the build asks for. */
#define _XOPEN_SOURCE 700
#include "tools/common_output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool fail(const FzToolOutput *out, const char *what, const char *path,
                 int err) {
  fprintf(stderr, "%s: error: %s '%s': %s\n", out->tool, what, path,
          strerror(err));
  return false;
}

static char *copy_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c)
    memcpy(c, s, n);
  return c;
}

/* The file to replace: path itself, or what a symbolic link at path
 * resolves to when that is a regular file. NULL (errno set) on failure. */
static char *resolve_target(const char *path) {
  struct stat lsb;
  if (lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode)) {
    char *real = realpath(path, NULL);
    if (real)
      return real;
    if (errno != ENOENT) /* a dangling link is replaced like a new path */
      return NULL;
  }
  return copy_string(path);
}

bool fzToolOutputOpen(FzToolOutput *out, const char *tool, const char *path) {
  memset(out, 0, sizeof *out);
  out->tool = tool;
  out->path = path;
  if (strcmp(path, "-") == 0) {
    out->file = stdout;
    return true;
  }
  struct stat sb;
  bool exists = stat(path, &sb) == 0;
  if (exists && !S_ISREG(sb.st_mode)) {
    /* A device, FIFO or socket: write in place (a directory fails
     * here, with EISDIR). */
    out->file = fopen(path, "wb");
    if (!out->file)
      return fail(out, "cannot open output file", path, errno);
    return true;
  }
  out->target = resolve_target(path);
  if (!out->target)
    return fail(out, "cannot resolve output file", path, errno);
  size_t n = strlen(out->target);
  out->tmpPath = malloc(n + sizeof ".tmp.XXXXXX");
  if (!out->tmpPath) {
    free(out->target);
    return fail(out, "cannot open output file", path, ENOMEM);
  }
  memcpy(out->tmpPath, out->target, n);
  memcpy(out->tmpPath + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
  /* mkstemp opens with O_CREAT | O_EXCL: a link planted under the
   * temporary's name is never followed. */
  int fd = mkstemp(out->tmpPath);
  if (fd < 0) {
    int err = errno;
    fail(out, "cannot create a temporary file for", path, err);
    free(out->tmpPath);
    free(out->target);
    out->tmpPath = out->target = NULL;
    return false;
  }
  /* mkstemp makes the file 0600: give it the mode the file it replaces
   * had, or the usual 0666 less the umask for a new one. */
  mode_t mode;
  if (exists) {
    mode = sb.st_mode & 07777;
  } else {
    mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  if (fchmod(fd, mode) != 0) {
    int err = errno;
    close(fd);
    unlink(out->tmpPath);
    fail(out, "cannot set the mode of", out->tmpPath, err);
    free(out->tmpPath);
    free(out->target);
    out->tmpPath = out->target = NULL;
    return false;
  }
  out->file = fdopen(fd, "wb");
  if (!out->file) {
    int err = errno;
    close(fd);
    unlink(out->tmpPath);
    fail(out, "cannot open output file", path, err);
    free(out->tmpPath);
    free(out->target);
    out->tmpPath = out->target = NULL;
    return false;
  }
  return true;
}

bool fzToolOutputWriteBytes(FzToolOutput *out, const void *data, size_t len) {
  if (len == 0 || out->writeErrno)
    return out->writeErrno == 0;
  errno = 0;
  if (fwrite(data, 1, len, out->file) == len)
    return true;
  out->writeErrno = errno ? errno : EIO;
  return false;
}

void fzToolOutputWrite(FzStringRef chunk, void *userData) {
  fzToolOutputWriteBytes(userData, chunk.data, chunk.length);
}

bool fzToolOutputClose(FzToolOutput *out, bool commit) {
  const char *shown = strcmp(out->path, "-") == 0 ? "<stdout>" : out->path;
  bool ok = true;
  errno = 0;
  if (fflush(out->file) != 0 && !out->writeErrno)
    out->writeErrno = errno ? errno : EIO;
  if (ferror(out->file) && !out->writeErrno)
    out->writeErrno = EIO;
  if (out->file == stdout) {
    if (out->writeErrno)
      ok = fail(out, "cannot write output file", shown, out->writeErrno);
    return ok;
  }
  if (out->writeErrno)
    ok = fail(out, "cannot write output file", shown, out->writeErrno);
  if (ok && commit && out->tmpPath && fsync(fileno(out->file)) != 0)
    ok = fail(out, "cannot write output file", shown, errno);
  errno = 0;
  if (fclose(out->file) != 0 && ok)
    ok = fail(out, "cannot write output file", shown, errno ? errno : EIO);
  out->file = NULL;
  if (out->tmpPath) {
    if (ok && commit && rename(out->tmpPath, out->target) != 0)
      ok = fail(out, "cannot replace output file", out->target, errno);
    if (!ok || !commit)
      unlink(out->tmpPath);
    free(out->tmpPath);
    free(out->target);
    out->tmpPath = out->target = NULL;
  }
  return ok;
}
