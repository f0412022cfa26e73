/* importers/onnx/versions.c - which version of an op a model means, and
 * the ops the importer refuses with a reason.
 *
 * An ONNX model imports an opset of the default domain; each op's
 * definition is the newest version of that op whose "since version" is at
 * most the opset (ReduceMax at opset 19 is ReduceMax-18). The table below
 * lists, for every op type the importer reads, the since-versions of its
 * definitions up to FZ_ONNX_MAX_OPSET, as ONNX's operator changelog
 * (docs/Changelog.md) gives them. Every listed version is one the
 * importer reads; handlers tell the forms apart with im->opVersion.
 *
 * A model may import a newer opset than FZ_ONNX_MAX_OPSET: its nodes whose
 * version the table cannot tell (every op may have changed after the
 * newest opset the table knows) get errors one by one, never the whole
 * model at once. A node whose op does not exist yet at the model's opset
 * (Gelu at opset 18) is an error in the model.
 */
#include <string.h>

#include "importers/onnx/onnx_internal.h"

typedef struct OpVersions {
  const char *opType;
  unsigned char since[12]; /* ascending, 0-terminated */
} OpVersions;

static const OpVersions kVersions[] = {
    /* Deprecated from version 10 (Resize replaces it); read as version 9. */
    {"Abs", {1, 6, 13}},
    {"Acos", {7}},
    {"Acosh", {9}},
    {"Add", {1, 6, 7, 13, 14}},
    {"AffineGrid", {20}},
    {"And", {1, 7}},
    {"ArgMax", {1, 11, 12, 13}},
    {"ArgMin", {1, 11, 12, 13}},
    {"Asin", {7}},
    {"Asinh", {9}},
    {"Atan", {7}},
    {"Atanh", {9}},
    {"AveragePool", {1, 7, 10, 11, 19}},
    {"BatchNormalization", {1, 6, 7, 9, 14, 15}},
    {"BitShift", {11}},
    {"BitwiseNot", {18}},
    {"BlackmanWindow", {17}},
    {"Cast", {1, 6, 9, 13, 19, 21}},
    {"CastLike", {15, 19, 21}},
    {"Ceil", {1, 6, 13}},
    {"Celu", {12}},
    {"CenterCropPad", {18}},
    {"Clip", {1, 6, 11, 12, 13}},
    {"Col2Im", {18}},
    {"Compress", {9, 11}},
    {"Concat", {1, 4, 11, 13}},
    {"Constant", {1, 9, 11, 12, 13, 19, 21}},
    {"ConstantOfShape", {9, 20, 21}},
    {"Conv", {1, 11}},
    {"ConvInteger", {10}},
    {"ConvTranspose", {1, 11}},
    {"Cos", {7}},
    {"Cosh", {9}},
    {"CumSum", {11, 14}},
    {"DFT", {17, 20}},
    {"DepthToSpace", {1, 11, 13}},
    {"DequantizeLinear", {10, 13, 19, 21}},
    {"Det", {11}},
    {"Div", {1, 6, 7, 13, 14}},
    {"Dropout", {1, 6, 7, 10, 12, 13}},
    {"DynamicQuantizeLinear", {11}},
    {"Einsum", {12}},
    {"Elu", {1, 6}},
    {"Equal", {1, 7, 11, 13, 19}},
    {"Erf", {9, 13}},
    {"Exp", {1, 6, 13}},
    {"Expand", {8, 13}},
    {"EyeLike", {9}},
    {"Flatten", {1, 9, 11, 13, 21}},
    {"Floor", {1, 6, 13}},
    {"GRU", {1, 3, 7, 14}},
    {"Gather", {1, 11, 13}},
    {"GatherElements", {11, 13}},
    {"GatherND", {11, 12, 13}},
    {"Gelu", {20}},
    {"Gemm", {1, 6, 7, 9, 11, 13}},
    {"GlobalAveragePool", {1}},
    {"GlobalMaxPool", {1}},
    {"Greater", {1, 7, 9, 13}},
    {"GreaterOrEqual", {12, 16}},
    {"GridSample", {16, 20}},
    {"GroupNormalization", {18, 21}},
    {"HammingWindow", {17}},
    {"HannWindow", {17}},
    {"HardSigmoid", {1, 6}},
    {"HardSwish", {14}},
    {"Hardmax", {1, 11, 13}},
    {"Identity", {1, 13, 14, 16, 19, 21}},
    {"If", {1, 11, 13, 16, 19, 21}},
    {"InstanceNormalization", {1, 6}},
    {"IsInf", {10, 20}},
    {"IsNaN", {9, 13, 20}},
    {"LRN", {1, 13}},
    {"LSTM", {1, 7, 14}},
    {"LayerNormalization", {17}},
    {"LeakyRelu", {1, 6, 16}},
    {"Less", {1, 7, 9, 13}},
    {"LessOrEqual", {12, 16}},
    {"Log", {1, 6, 13}},
    {"LogSoftmax", {1, 11, 13}},
    {"Loop", {1, 11, 13, 16, 19, 21}},
    {"LpPool", {1, 2, 11, 18}},
    {"MatMul", {1, 9, 13}},
    {"MatMulInteger", {10}},
    {"Max", {1, 6, 8, 12, 13}},
    {"MaxPool", {1, 8, 10, 11, 12}},
    {"MaxUnpool", {9, 11}},
    {"Mean", {1, 6, 8, 13}},
    {"MeanVarianceNormalization", {9, 13}},
    {"MelWeightMatrix", {17}},
    {"Min", {1, 6, 8, 12, 13}},
    {"Mish", {18}},
    {"Mod", {10, 13}},
    {"Mul", {1, 6, 7, 13, 14}},
    {"Neg", {1, 6, 13}},
    {"NegativeLogLikelihoodLoss", {12, 13}},
    {"NonMaxSuppression", {10, 11}},
    {"NonZero", {9, 13}},
    {"Not", {1}},
    {"OneHot", {9, 11}},
    {"Or", {1, 7}},
    {"PRelu", {1, 6, 7, 9, 16}},
    {"Pad", {1, 2, 11, 13, 18, 19, 21}},
    {"Pow", {1, 7, 12, 13, 15}},
    {"QLinearConv", {10}},
    {"QLinearMatMul", {10, 21}},
    {"QuantizeLinear", {10, 13, 19, 21}},
    {"RNN", {1, 7, 14}},
    {"Range", {11}},
    {"Reciprocal", {1, 6, 13}},
    {"ReduceL1", {1, 11, 13, 18}},
    {"ReduceL2", {1, 11, 13, 18}},
    {"ReduceLogSum", {1, 11, 13, 18}},
    {"ReduceLogSumExp", {1, 11, 13, 18}},
    {"ReduceMax", {1, 11, 12, 13, 18, 20}},
    {"ReduceMean", {1, 11, 13, 18}},
    {"ReduceMin", {1, 11, 12, 13, 18, 20}},
    {"ReduceProd", {1, 11, 13, 18}},
    {"ReduceSum", {1, 11, 13}},
    {"ReduceSumSquare", {1, 11, 13, 18}},
    {"Relu", {1, 6, 13, 14}},
    {"Reshape", {1, 5, 13, 14, 19, 21}},
    {"Resize", {10, 11, 13, 18, 19}},
    {"ReverseSequence", {10}},
    {"RoiAlign", {10, 16}},
    {"Round", {11}},
    {"STFT", {17}},
    {"Scan", {8, 9, 11, 16, 19, 21}},
    {"Scatter", {9, 11}},
    {"ScatterElements", {11, 13, 16, 18}},
    {"ScatterND", {11, 13, 16, 18}},
    {"Selu", {1, 6}},
    {"Shape", {1, 13, 15, 19, 21}},
    {"Shrink", {9}},
    {"Sigmoid", {1, 6, 13}},
    {"Sign", {9, 13}},
    {"Sin", {7}},
    {"Sinh", {9}},
    {"Size", {1, 13, 19, 21}},
    {"Slice", {1, 10, 11, 13}},
    {"Softmax", {1, 11, 13}},
    {"SoftmaxCrossEntropyLoss", {12, 13}},
    {"Softplus", {1}},
    {"Softsign", {1}},
    {"SpaceToDepth", {1, 13}},
    {"Split", {1, 2, 11, 13, 18}},
    {"Sqrt", {1, 6, 13}},
    {"Squeeze", {1, 11, 13, 21}},
    {"Sub", {1, 6, 7, 13, 14}},
    {"Sum", {1, 6, 8, 13}},
    {"Tan", {7}},
    {"Tanh", {1, 6, 13}},
    {"TfIdfVectorizer", {9}},
    {"ThresholdedRelu", {10}},
    {"Tile", {1, 6, 13}},
    {"TopK", {1, 10, 11}},
    {"Transpose", {1, 13, 21}},
    {"Trilu", {14}},
    {"Unique", {11}},
    {"Unsqueeze", {1, 11, 13, 21}},
    {"Upsample", {1, 7, 9, 10}},
    {"Where", {9, 16}},
    {"Xor", {1, 7}},
};

static const OpVersions *find_versions(const char *opType) {
  for (size_t i = 0; i < sizeof kVersions / sizeof kVersions[0]; ++i)
    if (!strcmp(opType, kVersions[i].opType))
      return &kVersions[i];
  return NULL;
}

int fzOnnxOpVersion(const char *opType, int64_t opset, int *first,
                    int *newest) {
  const OpVersions *v = find_versions(opType);
  if (!v)
    return -1;
  int found = 0, last = 0;
  for (size_t i = 0; i < sizeof v->since && v->since[i]; ++i) {
    last = v->since[i];
    if (last <= opset)
      found = last;
  }
  if (first)
    *first = v->since[0];
  if (newest)
    *newest = last;
  return found;
}

/*===--- Ops refused with a reason ---------------------------------------===*/

/* ONNX ops the importer has no row for, and why: the error says more than
 * "unsupported op type" where the reason is the graph dialect's. */
static const struct {
  const char *opType;
  const char *why;
} kRefused[] = {
    {"BitwiseAnd", "the graph dialect's and/or/xor are logical (i1) only; "
                   "it has no integer bitwise ops"},
    {"BitwiseOr", "the graph dialect's and/or/xor are logical (i1) only; "
                  "it has no integer bitwise ops"},
    {"BitwiseXor", "the graph dialect's and/or/xor are logical (i1) only; "
                   "it has no integer bitwise ops"},
    {"DeformConv", "no graph op samples its input at learned offsets"},
    {"ImageDecoder", "byte and string tensors are unsupported"},
    {"RegexFullMatch", "string tensors are unsupported"},
    {"StringConcat", "string tensors are unsupported"},
    {"StringSplit", "string tensors are unsupported"},
};

const char *fzOnnxRefusedReason(const char *opType) {
  for (size_t i = 0; i < sizeof kRefused / sizeof kRefused[0]; ++i)
    if (!strcmp(kRefused[i].opType, opType))
      return kRefused[i].why;
  return NULL;
}
