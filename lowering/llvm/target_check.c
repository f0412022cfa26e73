/* lowering/llvm/target_check.c - target names checked before LLVM sees
 * them.
 *
 * LLVM takes a CPU name, a feature string and a GPU arch on trust: an
 * unknown CPU or feature is a warning printed on stderr and ignored, a
 * 32-bit x86 CPU with a 64-bit triple ends the process ("LLVM ERROR:
 * 64-bit code requested on a subtarget that doesn't support it"), and an
 * NVPTX processor it does not know aborts in code generation. The C API
 * has no query for the names a target knows (MCSubtargetInfo is C++), so
 * the tables below are LLVM 19's own lists (`llc-19 -mtriple=x86_64
 * -mcpu=help`, `llc-19 -mtriple=nvptx64 -mcpu=help`); the 32-bit-only x86
 * CPUs are those llc-19 refuses with an x86_64 triple. Triples of other
 * architectures are passed through unchecked (LLVM's warning then stands).
 */
#include <stdio.h>
#include <string.h>

#include "lowering/llvm/emit_internal.h"

/* x86 CPUs LLVM 19 knows (every spelling). */
static const char *const kX86Cpus[] = {
    "alderlake", "amdfam10", "arrowlake", "arrowlake-s", "arrowlake_s",
    "athlon", "athlon-4", "athlon-fx", "athlon-mp", "athlon-tbird",
    "athlon-xp", "athlon64", "athlon64-sse3", "atom", "atom_sse4_2",
    "atom_sse4_2_movbe", "barcelona", "bdver1", "bdver2", "bdver3", "bdver4",
    "bonnell", "broadwell", "btver1", "btver2", "c3", "c3-2", "cannonlake",
    "cascadelake", "clearwaterforest", "cooperlake", "core-avx-i",
    "core-avx2", "core2", "core_2_duo_sse4_1", "core_2_duo_ssse3",
    "core_2nd_gen_avx", "core_3rd_gen_avx", "core_4th_gen_avx",
    "core_4th_gen_avx_tsx", "core_5th_gen_avx", "core_5th_gen_avx_tsx",
    "core_aes_pclmulqdq", "core_i7_sse4_2", "corei7", "corei7-avx",
    "emeraldrapids", "generic", "geode", "goldmont", "goldmont-plus",
    "goldmont_plus", "gracemont", "grandridge", "graniterapids",
    "graniterapids-d", "graniterapids_d", "haswell", "i386", "i486", "i586",
    "i686", "icelake-client", "icelake-server", "icelake_client",
    "icelake_server", "ivybridge", "k6", "k6-2", "k6-3", "k8", "k8-sse3",
    "knl", "knm", "lakemont", "lunarlake", "meteorlake", "mic_avx512",
    "nehalem", "nocona", "opteron", "opteron-sse3", "pantherlake", "penryn",
    "pentium", "pentium-m", "pentium-mmx", "pentium2", "pentium3",
    "pentium3m", "pentium4", "pentium4m", "pentium_4", "pentium_4_sse3",
    "pentium_ii", "pentium_iii", "pentium_iii_no_xmm_regs", "pentium_m",
    "pentium_mmx", "pentium_pro", "pentiumpro", "prescott", "raptorlake",
    "rocketlake", "sandybridge", "sapphirerapids", "sierraforest",
    "silvermont", "skx", "skylake", "skylake-avx512", "skylake_avx512",
    "slm", "tigerlake", "tremont", "westmere", "winchip-c6", "winchip2",
    "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "yonah", "znver1",
    "znver2", "znver3", "znver4", "znver5",
};

/* ... of which these have no 64-bit mode. */
static const char *const kX86Cpus32[] = {
    "athlon", "athlon-4", "athlon-mp", "athlon-tbird", "athlon-xp", "c3",
    "c3-2", "geode", "i386", "i486", "i586", "i686", "k6", "k6-2", "k6-3",
    "lakemont", "pentium", "pentium-m", "pentium-mmx", "pentium2",
    "pentium3", "pentium3m", "pentium4", "pentium4m", "pentium_4",
    "pentium_4_sse3", "pentium_ii", "pentium_iii", "pentium_iii_no_xmm_regs",
    "pentium_m", "pentium_mmx", "pentium_pro", "pentiumpro", "prescott",
    "winchip-c6", "winchip2", "yonah",
};

/* x86 features (the names after + or - in a feature string). */
static const char *const kX86Features[] = {
    "16bit-mode", "32bit-mode", "64bit", "64bit-mode", "adx", "aes",
    "allow-light-256-bit", "amx-bf16", "amx-complex", "amx-fp16", "amx-int8",
    "amx-tile", "avx", "avx10.1-256", "avx10.1-512", "avx2", "avx512bf16",
    "avx512bitalg", "avx512bw", "avx512cd", "avx512dq", "avx512f",
    "avx512fp16", "avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512vl",
    "avx512vnni", "avx512vp2intersect", "avx512vpopcntdq", "avxifma",
    "avxneconvert", "avxvnni", "avxvnniint16", "avxvnniint8", "bmi", "bmi2",
    "branch-hint", "branchfusion", "ccmp", "cf", "cldemote", "clflushopt",
    "clwb", "clzero", "cmov", "cmpccxadd", "crc32", "cx16", "cx8", "egpr",
    "enqcmd", "ermsb", "evex512", "f16c", "false-deps-getmant",
    "false-deps-lzcnt-tzcnt", "false-deps-mulc", "false-deps-mullq",
    "false-deps-perm", "false-deps-popcnt", "false-deps-range",
    "fast-11bytenop", "fast-15bytenop", "fast-7bytenop", "fast-bextr",
    "fast-dpwssd", "fast-gather", "fast-hops", "fast-imm16", "fast-lzcnt",
    "fast-movbe", "fast-scalar-fsqrt", "fast-scalar-shift-masks",
    "fast-shld-rotate", "fast-variable-crosslane-shuffle",
    "fast-variable-perlane-shuffle", "fast-vector-fsqrt",
    "fast-vector-shift-masks", "faster-shift-than-shuffle", "fma", "fma4",
    "fsgsbase", "fsrm", "fxsr", "gfni", "harden-sls-ijmp", "harden-sls-ret",
    "hreset", "idivl-to-divb", "idivq-to-divl", "inline-asm-use-gpr32",
    "invpcid", "kl", "lea-sp", "lea-uses-ag", "lvi-cfi",
    "lvi-load-hardening", "lwp", "lzcnt", "macrofusion", "mmx", "movbe",
    "movdir64b", "movdiri", "mwaitx", "ndd", "nf", "no-bypass-delay",
    "no-bypass-delay-blend", "no-bypass-delay-mov",
    "no-bypass-delay-shuffle", "nopl", "pad-short-functions", "pclmul",
    "pconfig", "pku", "popcnt", "ppx", "prefer-128-bit", "prefer-256-bit",
    "prefer-mask-registers", "prefer-movmsk-over-vtest", "prefer-no-gather",
    "prefer-no-scatter", "prefetchi", "prfchw", "ptwrite", "push2pop2",
    "raoint", "rdpid", "rdpru", "rdrnd", "rdseed", "retpoline",
    "retpoline-external-thunk", "retpoline-indirect-branches",
    "retpoline-indirect-calls", "rtm", "sahf", "sbb-dep-breaking",
    "serialize", "seses", "sgx", "sha", "sha512", "shstk", "slow-3ops-lea",
    "slow-incdec", "slow-lea", "slow-pmaddwd", "slow-pmulld", "slow-shld",
    "slow-two-mem-ops", "slow-unaligned-mem-16", "slow-unaligned-mem-32",
    "sm3", "sm4", "soft-float", "sse", "sse-unaligned-mem", "sse2", "sse3",
    "sse4.1", "sse4.2", "sse4a", "ssse3", "tagged-globals", "tbm",
    "tsxldtrk", "tuning-fast-imm-vector-shift", "uintr",
    "use-glm-div-sqrt-costs", "use-slm-arith-costs", "usermsr", "vaes",
    "vpclmulqdq", "vzeroupper", "waitpkg", "wbnoinvd", "widekl", "x87",
    "xop", "xsave", "xsavec", "xsaveopt", "xsaves", "zu",
};

/* Features an x86-64 target cannot turn off: the ABI passes floats in
 * SSE registers (LLVM fails in code generation without them). */
static const char *const kX86Baseline[] = {"64bit", "sse", "sse2", "x87"};

/* NVPTX processors LLVM 19 knows. */
static const char *const kNvptxArchs[] = {
    "sm_20", "sm_21", "sm_30", "sm_32", "sm_35", "sm_37", "sm_50",
    "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72",
    "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a",
};

/* The oldest compute capability the generated kernels run on. */
enum { FZ_GPU_MIN_CC = 80 };

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static bool in_table(const char *const *t, size_t n, const char *s,
                     size_t len) {
  for (size_t i = 0; i < n; ++i)
    if (strlen(t[i]) == len && memcmp(t[i], s, len) == 0)
      return true;
  return false;
}

/* The architecture part of a triple ("x86_64" of x86_64-pc-linux-gnu). */
static bool triple_arch_is(const char *triple, const char *arch) {
  size_t n = strlen(arch);
  return strncmp(triple, arch, n) == 0 &&
         (triple[n] == '-' || triple[n] == '\0');
}

bool fzGpuArchValidate(FzContext *ctx, const char *arch) {
  /* LLVM 19 knows sm_20 to sm_90a, but the kernels fuse generates need
   * sm_80 (mma.m16n8k16 for bf16, cp.async, ldmatrix); sm_30 to sm_75
   * fail in LLVM's instruction selection, which aborts the process. */
  int cc = 0;
  if (arch && in_table(kNvptxArchs, COUNT(kNvptxArchs), arch, strlen(arch)) &&
      sscanf(arch, "sm_%d", &cc) == 1 && cc >= FZ_GPU_MIN_CC)
    return true;
  return fzEmitError(ctx, NULL,
                     "emit-ptx: --gpu-arch expects sm_NN or sm_NNa, one of "
                     "the NVPTX processors of LLVM 19 that fuse's kernels "
                     "support (sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a), "
                     "got '%s'",
                     arch ? arch : "(null)");
}

/* Checks a comma-separated feature string: each item +name or -name
 * with a name from `names`; on x86-64 none of the baseline off. */
static bool check_features(FzContext *ctx, const char *features,
                           const char *const *names, size_t numNames,
                           bool x86_64) {
  const char *p = features;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == 0 || (p[0] != '+' && p[0] != '-') ||
        (names && !in_table(names, numNames, p + 1, len - 1)))
      return fzEmitError(ctx, NULL,
                         "emit-llvm: unknown target feature '%.*s' in '%s' "
                         "(expected a comma-separated list of +feature or "
                         "-feature; `llc-19 -mattr=help` lists them)",
                         (int)len, p, features);
    if (x86_64 && p[0] == '-' &&
        in_table(kX86Baseline, COUNT(kX86Baseline), p + 1, len - 1))
      return fzEmitError(ctx, NULL,
                         "emit-llvm: target feature '%.*s' cannot be turned "
                         "off for x86-64 (its ABI needs it)",
                         (int)len, p);
    p += len;
    if (*p == ',')
      ++p;
  }
  return true;
}

bool fzTargetValidate(FzContext *ctx, const char *triple, const char *cpu,
                      const char *features) {
  bool x86 = triple_arch_is(triple, "x86_64") ||
             triple_arch_is(triple, "i386") || triple_arch_is(triple, "i686") ||
             triple_arch_is(triple, "x86");
  bool x86_64 = triple_arch_is(triple, "x86_64");
  bool nvptx = triple_arch_is(triple, "nvptx64") ||
               triple_arch_is(triple, "nvptx");
  if (cpu && *cpu && x86) {
    if (!in_table(kX86Cpus, COUNT(kX86Cpus), cpu, strlen(cpu)))
      return fzEmitError(ctx, NULL,
                         "emit-llvm: unknown CPU '%s' for target '%s' (`llc-19 "
                         "-mtriple=%s -mcpu=help` lists them)",
                         cpu, triple, triple);
    if (x86_64 && in_table(kX86Cpus32, COUNT(kX86Cpus32), cpu, strlen(cpu)))
      return fzEmitError(ctx, NULL,
                         "emit-llvm: CPU '%s' has no 64-bit mode, but target "
                         "'%s' is 64-bit",
                         cpu, triple);
  }
  if (cpu && *cpu && nvptx && !fzGpuArchValidate(ctx, cpu))
    return false;
  if (features && *features && (x86 || nvptx))
    return check_features(ctx, features, x86 ? kX86Features : NULL,
                          x86 ? COUNT(kX86Features) : 0, x86_64);
  return true;
}
