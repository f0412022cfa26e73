#!/usr/bin/env python3
"""Generates the canonicalize+cse benchmark input: one function holding a
random DAG of N elementwise ops on tensor<4xf32>, written twice with the
same structure:

  --dialect fuse : graph.add / mul / sub / max / relu / constant
  --dialect mlir : arith.addf / mulf / subf / maximumf, math.absf,
                   arith.constant (for mlir-opt)

The DAG has work for both passes: about 5% of the ops repeat an earlier op
exactly (CSE), about 3% are splat constants, some combining only constants
(folding), some multiplying by one (folding to the operand). Operands come
mostly from a recent window so the DAG is deep, sometimes from anywhere.

  gen_canon_dag.py --ops 200000 --seed 1 --dialect fuse > dag.fuse
"""
import argparse
import random
import sys

T = "tensor<4xf32>"
FUSE = {"add": "graph.add", "mul": "graph.mul", "sub": "graph.sub",
        "max": "graph.max", "relu": "graph.relu", "const": "graph.constant"}
MLIR = {"add": "arith.addf", "mul": "arith.mulf", "sub": "arith.subf",
        "max": "arith.maximumf", "relu": "math.absf",
        "const": "arith.constant"}


def build(n, seed):
    rng = random.Random(seed)
    ops = []          # (kind, operands, value-for-const)
    values = ["%arg0", "%arg1", "%arg2", "%arg3"]
    consts = {}
    for i in range(n):
        r = rng.random()
        name = "%%v%d" % i
        if r < 0.03:
            c = rng.choice(["0.0", "1.0", "2.0", "5.000000e-01"])
            ops.append(("const", [], c))
            consts[name] = c
        elif r < 0.08 and ops:
            # Repeat an earlier non-constant op exactly.
            j = rng.randrange(max(0, len(ops) - 2000), len(ops))
            kind, operands, c = ops[j]
            ops.append((kind, list(operands), c))
        else:
            kind = rng.choice(["add", "mul", "sub", "max", "relu"])
            arity = 1 if kind == "relu" else 2
            operands = []
            for _ in range(arity):
                if rng.random() < 0.9:
                    lo = max(0, len(values) - 64)
                    operands.append(values[rng.randrange(lo, len(values))])
                else:
                    operands.append(rng.choice(values))
            ops.append((kind, operands, None))
        values.append(name)
    outs = values[-8:]
    return ops, outs


def emit(ops, outs, names, out):
    w = out.write
    w("func.func @dag(%%arg0: %s, %%arg1: %s, %%arg2: %s, %%arg3: %s) -> (%s) {\n"
      % (T, T, T, T, ", ".join([T] * len(outs))))
    for i, (kind, operands, c) in enumerate(ops):
        op = names[kind]
        if kind == "const":
            w("  %%v%d = %s dense<%s> : %s\n" % (i, op, c, T))
        elif names is FUSE:
            if kind == "relu":
                w("  %%v%d = %s %s : %s\n" % (i, op, operands[0], T))
            else:
                w("  %%v%d = %s %s, %s : %s, %s -> %s\n"
                  % (i, op, operands[0], operands[1], T, T, T))
        else:
            w("  %%v%d = %s %s : %s\n" % (i, op, ", ".join(operands), T))
    w("  return %s : %s\n}\n" % (", ".join(outs), ", ".join([T] * len(outs))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=200000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dialect", choices=["fuse", "mlir"], default="fuse")
    a = ap.parse_args()
    ops, outs = build(a.ops, a.seed)
    emit(ops, outs, FUSE if a.dialect == "fuse" else MLIR, sys.stdout)


if __name__ == "__main__":
    main()
