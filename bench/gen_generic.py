#!/usr/bin/env python3
"""Generate a large MLIR generic-syntax benchmark input for fuse-opt.

Usage: gen_generic.py N SEED > file.mlir

Writes a builtin.module holding one func.func whose body has N operations
of unregistered dialects (bench.*) in MLIR's generic syntax, followed by a
func.return. The ops form a random DAG over earlier values (mostly recent
ones, sometimes far back), on f32 and tensor<4xf32>, with a mix of
operand counts, multi-result ops, discardable attributes of many kinds
and properties. Both mlir-opt 19 (--allow-unregistered-dialect) and
fuse-opt accept the output, and their generic printouts of it agree.
The same N and SEED always give the same file.
"""

import random
import sys

F32 = "f32"
TENSOR = "tensor<4xf32>"

# Float constants chosen to exercise the float printer: short decimal
# forms, values that need 9 significant digits, tiny and huge exponents.
FLOATS = ["1.5", "0.1", "-2.25", "3.0e-20", "1.0e+30", "0.333333343",
          "6.250000e-02", "-0.0", "1024.0", "2.71828175"]
STRINGS = ["a", "relu", "fused kernel", "x\\22y", "tab\\09end"]


class Gen:
    def __init__(self, n, seed):
        self.n = n
        self.rng = random.Random(seed)
        self.next_id = 0
        # Values available so far, per type, as SSA use strings.
        self.values = {F32: ["%arg0", "%arg1"], TENSOR: ["%arg2", "%arg3"]}
        self.out = []

    def pick(self, ty):
        """An earlier value of type ty: usually recent, sometimes old."""
        vals = self.values[ty]
        r = self.rng.random()
        if r < 0.75:
            window = min(len(vals), 16)
            return vals[len(vals) - 1 - self.rng.randrange(window)]
        return vals[self.rng.randrange(len(vals))]

    def attr_dict(self):
        """A discardable attribute dictionary (possibly empty), sorted
        by key as both printers sort it."""
        rng = self.rng
        entries = []
        if rng.random() < 0.35:
            entries.append(("alpha", "%s : f32" % rng.choice(FLOATS)))
        if rng.random() < 0.15:
            entries.append(("axes", "[%d, %d]" % (rng.randrange(4),
                                                  rng.randrange(4))))
        if rng.random() < 0.1:
            entries.append(("fast", "unit"))
        if rng.random() < 0.1:
            entries.append(("flag", rng.choice(["true", "false"])))
        if rng.random() < 0.2:
            entries.append(("idx", "%d : i64" % rng.randrange(-1000, 100000)))
        if rng.random() < 0.1:
            entries.append(("name", '"%s"' % rng.choice(STRINGS)))
        if rng.random() < 0.05:
            entries.append(("ty", rng.choice(["tensor<?x4xf32>", "i32",
                                              "index", "bf16"])))
        if not entries:
            return ""
        return " {" + ", ".join("%s = %s" % (k, v) if v != "unit" else k
                                for k, v in entries) + "}"

    def emit(self, results, name, operands, props, attrs, in_types,
             out_types):
        rng = self.rng
        lhs = ""
        if len(results) == 1:
            lhs = "%s = " % results[0]
        elif len(results) > 1:
            lhs = "%s:%d = " % (results[0], len(results))
        outs = ", ".join(out_types)
        if len(out_types) != 1:
            outs = "(" + outs + ")"
        self.out.append('    %s"%s"(%s)%s%s : (%s) -> %s\n' % (
            lhs, name, ", ".join(operands), props, attrs,
            ", ".join(in_types), outs))

    def new_value(self):
        v = "%%%d" % self.next_id
        self.next_id += 1
        return v

    def one_op(self):
        rng = self.rng
        r = rng.random()
        ty = F32 if rng.random() < 0.5 else TENSOR
        attrs = self.attr_dict()
        if r < 0.30:  # binary elementwise
            name = rng.choice(["bench.add", "bench.mul", "bench.sub"])
            a, b = self.pick(ty), self.pick(ty)
            res = self.new_value()
            self.emit([res], name, [a, b], "", attrs, [ty, ty], [ty])
            self.values[ty].append(res)
        elif r < 0.50:  # unary
            name = rng.choice(["bench.relu", "bench.exp", "bench.neg"])
            a = self.pick(ty)
            res = self.new_value()
            self.emit([res], name, [a], "", attrs, [ty], [ty])
            self.values[ty].append(res)
        elif r < 0.60:  # f32 -> tensor
            a = self.pick(F32)
            res = self.new_value()
            self.emit([res], "bench.splat", [a], "", attrs, [F32], [TENSOR])
            self.values[TENSOR].append(res)
        elif r < 0.70:  # tensor -> f32 with a property
            a = self.pick(TENSOR)
            res = self.new_value()
            props = " <{axis = %d : i64}>" % rng.randrange(1)
            self.emit([res], "bench.reduce", [a], props, attrs, [TENSOR],
                      [F32])
            self.values[F32].append(res)
        elif r < 0.78:  # constants
            res = self.new_value()
            if ty == F32:
                props = " <{value = %s : f32}>" % rng.choice(FLOATS)
            elif rng.random() < 0.5:
                props = " <{value = dense<%s> : tensor<4xf32>}>" % \
                    rng.choice(FLOATS)
            else:
                props = " <{value = dense<[%s]> : tensor<4xf32>}>" % \
                    ", ".join(rng.choice(FLOATS) for _ in range(4))
            self.emit([res], "bench.constant", [], props, attrs, [], [ty])
            self.values[ty].append(res)
        elif r < 0.88:  # two results, used through #N
            a, b = self.pick(TENSOR), self.pick(F32)
            res = self.new_value()
            self.emit([res, None], "bench.pair", [a, b], "", attrs,
                      [TENSOR, F32], [TENSOR, F32])
            self.values[TENSOR].append(res + "#0")
            self.values[F32].append(res + "#1")
        elif r < 0.95:  # three operands of mixed types
            a, b, c = self.pick(ty), self.pick(F32), self.pick(ty)
            res = self.new_value()
            self.emit([res], "bench.fma", [a, b, c], "", attrs, [ty, F32, ty],
                      [ty])
            self.values[ty].append(res)
        else:  # no results: a side effect
            a = self.pick(ty)
            self.emit([], "bench.store", [a], "", attrs, [ty], [])

    def run(self):
        w = self.out.append
        w("module {\n")
        w("  func.func @bench(%arg0: f32, %arg1: f32, "
          "%arg2: tensor<4xf32>, %arg3: tensor<4xf32>) "
          "-> (f32, tensor<4xf32>) {\n")
        for _ in range(self.n):
            self.one_op()
        f, t = self.values[F32][-1], self.values[TENSOR][-1]
        w('    "func.return"(%s, %s) : (f32, tensor<4xf32>) -> ()\n' % (f, t))
        w("  }\n}\n")
        return "".join(self.out)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: gen_generic.py N SEED > file.mlir\n")
        return 2
    try:
        n, seed = int(argv[1]), int(argv[2])
    except ValueError:
        sys.stderr.write("gen_generic.py: N and SEED must be integers\n")
        return 2
    if n < 0:
        sys.stderr.write("gen_generic.py: N must be >= 0\n")
        return 2
    sys.stdout.write(Gen(n, seed).run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
