/* fuzz_run.c - libFuzzer target for fuse-run's command line: option
 * parsing (tools/fuse_run.c, tools/fuse_run_cpu.c), input and output
 * files (.npy, --compare, --output-dir), the choice of the entry and the
 * device, and every device's run on small files.
 *
 * The input is split at newlines into at most 24 arguments after
 * "fuse-run"; the tool's main (compiled into this target as
 * fuseRunToolMain) runs in a scratch directory (/tmp/fuzz_run.XXXXXX,
 * emptied and refilled before every input) holding:
 *   g.fuse  two graph functions (@main: tensor<2x3xf32>, tensor<3xf32>;
 *           @other: tensor<4xf32>)
 *   l.fuse  a loop-level function (buffers, loop.num_outputs)
 *   k.fuse  a kernel launched from a loop-level host function
 *   m.onnx  the example MLP (when the source tree has it)
 *   a.npy, b.npy  inputs of @main; c.npy an i32 tensor; bad.npy garbage
 *   ref/output_0.npy  a reference of @main's result's shape
 * An argument holding '/' or starting with ".." is refused (the harness
 * returns without running), so that files are only read and written in
 * the scratch directory; so is --bench (a measurement loop of up to a
 * million runs, not input handling). stdin is /dev/null, stdout is
 * discarded. The tool must return 0, 1 or 2 and never crash, leak, or
 * trip a sanitizer. Give libFuzzer an absolute -artifact_prefix: a crash
 * inside the tool happens in the scratch directory.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz/fuzz_common.h"

int fuseRunToolMain(int argc, char **argv);

#define MAX_ARGS 24

static char g_root[64];
static int g_cwd = -1; /* the directory libFuzzer was started in */

static const char kGraph[] =
    "func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> "
    "tensor<2x3xf32> {\n"
    "  %0 = graph.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> "
    "tensor<2x3xf32>\n"
    "  %1 = graph.tanh %0 : tensor<2x3xf32>\n"
    "  %2 = graph.reduce_sum %1 {axes = array<i64: 1>, keepdims = true} : "
    "tensor<2x3xf32> -> tensor<2x1xf32>\n"
    "  %3 = graph.mul %1, %2 : tensor<2x3xf32>, tensor<2x1xf32> -> "
    "tensor<2x3xf32>\n"
    "  return %3 : tensor<2x3xf32>\n"
    "}\n"
    "func.func @other(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = graph.relu %x : tensor<4xf32>\n"
    "  return %0 : tensor<4xf32>\n"
    "}\n";

static const char kLoop[] =
    "func.func @main(%x: buffer<4xf32>, %y: buffer<4xf32>) attributes "
    "{loop.num_outputs = 1 : i64} {\n"
    "  %c0 = loop.constant 0 : index\n"
    "  %c1 = loop.constant 1 : index\n"
    "  %c4 = loop.constant 4 : index\n"
    "  loop.for %i = %c0 to %c4 step %c1 {\n"
    "    %v = loop.load %x[%i] : buffer<4xf32>\n"
    "    %w = loop.mulf %v, %v : f32\n"
    "    loop.store %w, %y[%i] : buffer<4xf32>\n"
    "    loop.yield\n"
    "  }\n"
    "  return\n"
    "}\n";

static const char kKernel[] =
    "kernel.func @scale(%x: buffer<64xf32>, %y: buffer<64xf32>) {\n"
    "  %t = kernel.thread_id x\n"
    "  %b = kernel.block_id x\n"
    "  %n = kernel.block_dim x\n"
    "  %b0 = loop.muli %b, %n : index\n"
    "  %i = loop.addi %b0, %t : index\n"
    "  %v = loop.load %x[%i] : buffer<64xf32>\n"
    "  %r = loop.addf %v, %v : f32\n"
    "  loop.store %r, %y[%i] : buffer<64xf32>\n"
    "  kernel.return\n"
    "}\n"
    "func.func @main(%x: buffer<64xf32>, %y: buffer<64xf32>) attributes "
    "{loop.num_outputs = 1 : i64} {\n"
    "  %c0 = loop.constant 0 : index\n"
    "  %c1 = loop.constant 1 : index\n"
    "  %c2 = loop.constant 2 : index\n"
    "  %c32 = loop.constant 32 : index\n"
    "  kernel.launch @scale blocks(%c2, %c1, %c1) threads(%c32, %c1, %c1) "
    "shared(%c0) args(%x, %y) : buffer<64xf32>, buffer<64xf32>\n"
    "  return\n"
    "}\n";

static void write_file(const char *name, const void *data, size_t size) {
  FILE *f = fopen(name, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
    abort();
}

static void write_npy(FzContext *ctx, const char *name, FzType *dtype,
                      size_t rank, const int64_t *shape) {
  FzTensor *t = fzTensorCreate(ctx, dtype, rank, shape);
  if (!t)
    abort();
  for (int64_t i = 0; i < t->numElements; ++i)
    fzTensorSetF64(t, i, 0.25 * (double)(i + 1) - 1.0);
  if (!fzNpyWriteFile(t, name))
    abort();
  fzTensorDestroy(t);
}

/* Copies the example MLP next to the other files, when it exists. */
static void copy_onnx(void) {
  FILE *in = fopen(FZ_SOURCE_DIR "/examples/models/mlp/model.onnx", "rb");
  if (!in)
    return;
  FILE *out = fopen("m.onnx", "wb");
  char buf[4096];
  size_t n;
  while (out && (n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n)
      abort();
  fclose(in);
  if (!out || fclose(out) != 0)
    abort();
}

/* Creates the scratch directory's files (in the current directory). */
static void populate(void) {
  write_file("g.fuse", kGraph, sizeof kGraph - 1);
  write_file("l.fuse", kLoop, sizeof kLoop - 1);
  write_file("k.fuse", kKernel, sizeof kKernel - 1);
  static const char kBad[] = "\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'";
  write_file("bad.npy", kBad, sizeof kBad - 1);
  FzContext *ctx = fzContextCreate();
  if (!ctx)
    abort();
  FzType *f32 = fzF32TypeGet(ctx);
  write_npy(ctx, "a.npy", f32, 2, (int64_t[]){2, 3});
  write_npy(ctx, "b.npy", f32, 1, (int64_t[]){3});
  write_npy(ctx, "c.npy", fzIntegerTypeGet(ctx, 32), 1, (int64_t[]){4});
  if (mkdir("ref", 0700) != 0)
    abort();
  write_npy(ctx, "ref/output_0.npy", f32, 2, (int64_t[]){2, 3});
  fzContextDestroy(ctx);
  copy_onnx();
}

/* Removes everything under the current directory (no symlinks are ever
 * created there, and nothing is nested deeper than one level). */
static void clear_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d)
    abort();
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
      clear_dir(p);
      rmdir(p);
    } else {
      unlink(p);
    }
  }
  closedir(d);
}

/* Removes the scratch directory when the fuzzer exits normally. */
static void remove_root(void) {
  clear_dir(g_root);
  rmdir(g_root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  snprintf(g_root, sizeof g_root, "/tmp/fuzz_run.XXXXXX");
  g_cwd = open(".", O_RDONLY | O_DIRECTORY);
  if (g_cwd < 0 || !mkdtemp(g_root))
    abort();
  atexit(remove_root);
  if (!freopen("/dev/null", "r", stdin) || !freopen("/dev/null", "w", stdout))
    abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  if (!buf)
    abort();
  memcpy(buf, data, size);
  buf[size] = '\0';
  char *argv[MAX_ARGS + 2];
  int argc = 0;
  argv[argc++] = "fuse-run";
  bool refused = false;
  for (size_t start = 0; start <= size && argc <= MAX_ARGS;) {
    size_t end = start;
    while (end < size && buf[end] != '\n')
      ++end;
    buf[end] = '\0';
    char *p = buf + start;
    if (strlen(p) != end - start || strchr(p, '/') || !strncmp(p, "..", 2) ||
        strstr(p, "bench"))
      refused = true; /* a NUL inside, a path outside, or --bench */
    argv[argc++] = p;
    start = end + 1;
  }
  argv[argc] = NULL;
  if (!refused) {
    if (chdir(g_root) != 0)
      abort();
    clear_dir(".");
    populate();
    int status = fuseRunToolMain(argc, argv);
    fflush(stdout);
    if (fchdir(g_cwd) != 0)
      abort();
    if (status < 0 || status > 2) {
      fprintf(stderr, "fuse-run returned %d\n", status);
      abort();
    }
  }
  free(buf);
  return 0;
}
