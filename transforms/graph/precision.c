/* transforms/graph/precision.c - the precision policy of fz/precision.h:
 * its one spelling (parse, name, the list the tools and pass options
 * share) and what `default` means on a GPU. Its graph half
 * (fzModuleApplyPrecision: convert-contractions for bf16 and fp16) is a
 * pipeline, in pipelines/cpu.c.
 */
#include <string.h>

#include "fz/precision.h"

/* Indexed by FzPrecision. */
#define NAME(id, name) name,
static const char *const kNames[FZ_NUM_PRECISIONS + 1] = {FZ_PRECISIONS(NAME)
                                                              NULL};
#undef NAME

bool fzPrecisionParse(FzStringRef text, FzPrecision *out) {
  for (int i = 0; i < FZ_NUM_PRECISIONS; ++i)
    if (fzStringRefEqual(text, fzStringRefFromCString(kNames[i]))) {
      *out = (FzPrecision)i;
      return true;
    }
  return false;
}

const char *fzPrecisionGetName(FzPrecision p) {
  return (unsigned)p < FZ_NUM_PRECISIONS ? kNames[p] : NULL;
}

const char *const *fzPrecisionGetNames(void) {
  return kNames;
}

const char *fzPrecisionGetChoicesText(void) {
  return "default, ieee, tf32, bf16 or fp16";
}

FzPrecision fzPrecisionResolve(FzPrecision p, int cc) {
  if (p != FZ_PRECISION_DEFAULT)
    return p;
  /* tf32 tensor cores (mma m16n8k8 .tf32) came with sm_80 (Ampere). */
  return cc == 0 || cc >= 80 ? FZ_PRECISION_TF32 : FZ_PRECISION_IEEE;
}
