/* fz/precision.h - the precision policy: how an f32 model's contractions
 * (matmuls and convolutions) may be computed, one spelling for every
 * tool and pass (docs/codegen.md "Precision").
 *
 *   default  the target's choice: on the GPU, tf32 for sm_80 and newer
 *            (every arch fuse's kernels support), ieee below; on the CPU
 *            and the interpreters, exact f32
 *   ieee     exact f32: f32 products and sums (CUDA cores on the GPU)
 *   tf32     f32 contractions on tf32 tensor cores: each operand rounded
 *            to a 10-bit mantissa, f32 accumulation (GPU only; the CPU
 *            computes exact f32)
 *   bf16     mixed precision: every f32 graph.matmul and graph.conv2d
 *   fp16     takes bf16 (fp16) operands with f32 accumulation and gives
 *            an f32 result; everything else (reductions, softmax,
 *            normalizations, elementwise ops, a conv's bias) stays f32.
 *            A graph rewrite (convert-contractions), so every backend
 *            runs it, the interpreter included, each exactly as the
 *            rewritten IR says.
 *
 * The policy acts at two levels: bf16 and fp16 at the graph level
 * (fzModuleApplyPrecision below), default/ieee/tf32 where f32 contraction
 * nests are mapped onto the GPU (lower-loop-to-kernel's `precision`
 * option, FzLoopToKernelOptions.precision, FzGpuOptions.precision). An
 * f32 contraction nest that reaches lower-loop-to-kernel under bf16 or
 * fp16 (a loop-level input) takes tf32 kernels.
 */
#ifndef FZ_PRECISION_H
#define FZ_PRECISION_H

#include "fz/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(ID, NAME) for every policy, once, in enum order (DEFAULT first:
 * zero, what a memset options struct holds). */
/* clang-format off */
#define FZ_PRECISIONS(X)                                                      \
  X(DEFAULT, "default") X(IEEE, "ieee") X(TF32, "tf32") X(BF16, "bf16")       \
  X(FP16, "fp16")

typedef enum FzPrecision {
#define FZ_PRECISION_ENUM_ENTRY(id, name) FZ_PRECISION_##id,
  FZ_PRECISIONS(FZ_PRECISION_ENUM_ENTRY)
#undef FZ_PRECISION_ENUM_ENTRY
  FZ_NUM_PRECISIONS
} FzPrecision;
/* clang-format on */

/* The policy spelled `text` (exactly one of the names above) into *out.
 * False for anything else, *out unchanged; nothing is reported (the
 * caller says where the text came from). */
FZ_API FZ_MUST_CHECK bool fzPrecisionParse(FzStringRef text, FzPrecision *out);
/* The name of p ("default", "ieee", ...; static), or NULL when p is not
 * an FzPrecision. */
FZ_API const char *fzPrecisionGetName(FzPrecision p);
/* Every name, in enum order, then NULL (static): a pass option's
 * `choices`. */
FZ_API const char *const *fzPrecisionGetNames(void);
/* "default, ieee, tf32, bf16 or fp16" (static), for messages. */
FZ_API const char *fzPrecisionGetChoicesText(void);

/* What p means for f32 contraction nests on a GPU of compute capability
 * cc (80 for sm_80; 0: unknown, taken as fuse's oldest supported arch,
 * sm_80): FZ_PRECISION_DEFAULT becomes FZ_PRECISION_TF32 for cc >= 80
 * and FZ_PRECISION_IEEE below; the others are returned unchanged. Such a
 * nest runs on tf32 tensor cores unless the result is
 * FZ_PRECISION_IEEE. */
FZ_API FzPrecision fzPrecisionResolve(FzPrecision p, int cc);

/* The graph half of the policy, in place on module (a builtin.module):
 * for FZ_PRECISION_BF16 and FZ_PRECISION_FP16, when the module is at the
 * graph level, convert-contractions{to=bf16|fp16} on it; with
 * `simplify`, fzLowerModuleForCpu's graph simplifications run first
 * (canonicalize, cse, recognize-composites, simplify-algebra,
 * simplify-reshapes, fold-transpose, fold-batchnorm, canonicalize), so
 * that folds which need the f32 contraction (a batch-norm into a
 * convolution's weights) still happen. Other policies leave the module
 * unchanged. The dialects and passes involved are registered in the
 * module's context if they were not. False after reporting errors. */
FZ_API FZ_MUST_CHECK bool fzModuleApplyPrecision(FzOp *module, FzPrecision p,
                                                 bool simplify);

#ifdef __cplusplus
}
#endif

#endif /* FZ_PRECISION_H */
