"""fuse's IR from Python: contexts, parsing and printing (custom and
generic forms), the verifier, walking ops, types, attributes, locations,
diagnostics as fuse.Error, and the lifetimes of docs/python.md."""
import gc
import os
import tempfile
import unittest

from common import ADD_RELU, MLP_ONNX, fuse, np


class ParsePrintTest(unittest.TestCase):
    def test_parse_print_round_trip(self):
        m = fuse.Module.parse(ADD_RELU)
        text = str(m)
        self.assertIn("graph.add %arg0, %arg1", text)
        self.assertEqual(str(fuse.Module.parse(text)), text)
        generic = m.print(generic=True)
        self.assertIn('"graph.relu"(%0) : (tensor<2x4xf32>) -> tensor<2x4xf32>',
                      generic)
        # The generic form reads back to the same module.
        self.assertEqual(str(fuse.Module.parse(generic)), text)
        self.assertIn('loc("<string>":2:8)', m.print(debug_info=True))
        self.assertTrue(m.verify())

    def test_parse_error_is_located(self):
        bad = ADD_RELU.replace("graph.relu", "graph.frob")
        with self.assertRaises(fuse.Error) as cm:
            fuse.Module.parse(bad, name="bad.fuse")
        e = cm.exception
        self.assertEqual(e.message, "custom op 'graph.frob' is unknown")
        self.assertEqual((e.location.file, e.location.line, e.location.column),
                         ("bad.fuse", 3, 8))
        self.assertEqual(len(e.diagnostics), 1)
        self.assertEqual(e.diagnostics[0].severity, "error")
        # str(e) renders it as the tools do: position, source line, caret.
        self.assertEqual(str(e).splitlines(), [
            "bad.fuse:3:8: error: custom op 'graph.frob' is unknown",
            "  %1 = graph.frob %0 : tensor<2x4xf32>",
            "       ^"])

    def test_every_error_is_reported(self):
        text = ("func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                "  %0 = graph.add %x, %y : tensor<4xf32>, tensor<4xf32> -> "
                "tensor<4xf32>\n  return %z : tensor<4xf32>\n}\n")
        with self.assertRaises(fuse.Error) as cm:
            fuse.Module.parse(text, name="two.fuse")
        self.assertGreaterEqual(len(cm.exception.diagnostics), 1)
        self.assertIn("undeclared SSA value", cm.exception.message)

    def test_verifier_errors(self):
        text = ("func.func @f(%x: tensor<4xf32>) -> tensor<8xf32> {\n"
                "  %0 = graph.relu %x : tensor<4xf32>\n"
                "  return %0 : tensor<4xf32>\n}\n")
        m = fuse.Module.parse(text, name="v.fuse")
        with self.assertRaises(fuse.Error) as cm:
            m.verify()
        self.assertIn("type of return operand 0", cm.exception.message)
        self.assertEqual(cm.exception.location.line, 3)
        with self.assertRaises(fuse.Error):
            m.functions[0].verify()

    def test_unregistered_dialects(self):
        text = ('func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n'
                '  %0 = "my.op"(%x) : (tensor<4xf32>) -> tensor<4xf32>\n'
                '  return %0 : tensor<4xf32>\n}\n')
        with self.assertRaises(fuse.Error):
            fuse.Module.parse(text)
        ctx = fuse.Context(allow_unregistered_dialects=True)
        self.assertTrue(ctx.allow_unregistered_dialects)
        m = fuse.Module.parse(text, ctx)
        op = m.functions[0].regions[0].blocks[0].operations[0]
        self.assertEqual(op.name, "my.op")
        self.assertFalse(op.is_registered)

    def test_read_files(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.fuse")
            with open(path, "w") as f:
                f.write(ADD_RELU)
            m = fuse.Module.read(path)
            self.assertEqual(m.functions[0].location.file, path)
        onnx = fuse.Module.read(MLP_ONNX)
        self.assertEqual([f.attributes["sym_name"].value
                          for f in onnx.functions], ["main"])
        with open(MLP_ONNX, "rb") as f:
            data = f.read()
        from_bytes = fuse.Module.from_onnx(data, name="mlp.onnx")
        self.assertEqual(str(from_bytes).count("graph."),
                         str(onnx).count("graph."))
        with self.assertRaises(fuse.Error) as cm:
            fuse.Module.from_onnx(b"not a model", name="junk.onnx")
        self.assertIn("junk.onnx", str(cm.exception))
        with self.assertRaises(fuse.Error) as cm:
            fuse.Module.read("/nonexistent/x.fuse")
        self.assertIn("/nonexistent/x.fuse", str(cm.exception))
        with self.assertRaises(TypeError):
            fuse.Module.parse(42)


class WalkTest(unittest.TestCase):
    def setUp(self):
        self.m = fuse.Module.parse(ADD_RELU, name="w.fuse")

    def test_ops_operands_results(self):
        ops = self.m.operation.walk()
        self.assertEqual([o.name for o in ops],
                         ["builtin.module", "func.func", "graph.add",
                          "graph.relu", "func.return"])
        self.assertEqual([o.name for o in self.m.operation.walk("post")],
                         ["graph.add", "graph.relu", "func.return",
                          "func.func", "builtin.module"])
        func = self.m.functions[0]
        self.assertEqual(func.parent, self.m.operation)
        (region,) = func.regions
        (block,) = region.blocks
        self.assertEqual(len(region), 1)
        self.assertEqual(len(block), 3)
        add, relu, ret = block
        self.assertEqual(block.parent, func)
        self.assertEqual(add.block, block)
        a, b = block.arguments
        self.assertTrue(a.is_block_argument)
        self.assertEqual(a.owner, block)
        self.assertEqual(a.index, 0)
        self.assertEqual(add.operands, (a, b))
        self.assertEqual(relu.operands, (add.result,))
        self.assertEqual(add.result.owner, add)
        self.assertFalse(add.result.is_block_argument)
        self.assertEqual(add.result.uses, [(relu, 0)])
        self.assertEqual(relu.result.uses, [(ret, 0)])
        self.assertEqual(ret.results, ())
        with self.assertRaises(ValueError):
            ret.result
        self.assertEqual(str(relu), "%1 = graph.relu %0 : tensor<2x4xf32>\n")
        self.assertIn("'graph.add'", repr(add))
        self.assertIn("result #0 of 'graph.add'", repr(add.result))
        self.assertEqual(add.location.line, 2)
        self.assertEqual(add.location.position, "w.fuse:2:8")
        self.assertEqual(add.module, self.m)
        self.assertEqual(len({add, add.result.owner}), 1)

    def test_attributes(self):
        func = self.m.functions[0]
        attrs = func.attributes
        self.assertEqual(set(attrs), {"sym_name", "function_type"})
        self.assertEqual(attrs["sym_name"].kind, "string")
        self.assertEqual(attrs["sym_name"].value, "main")
        ft = attrs["function_type"].value
        self.assertIsInstance(ft, fuse.Type)
        self.assertEqual(ft.kind, "function")
        self.assertEqual([str(t) for t in ft.inputs],
                         ["tensor<2x4xf32>", "tensor<4xf32>"])
        self.assertEqual([str(t) for t in ft.results], ["tensor<2x4xf32>"])

    def test_types(self):
        t = fuse.Type.parse("tensor<2x?x8xf32>", self.m.context)
        self.assertEqual(t.kind, "tensor")
        self.assertEqual(t.shape, (2, None, 8))
        self.assertEqual(t.rank, 3)
        self.assertEqual(str(t.element_type), "f32")
        self.assertEqual(t.element_type.width, 32)
        self.assertEqual(t.dtype, "float32")
        self.assertEqual(t, fuse.Type.parse("tensor<2x?x8xf32>", self.m.context))
        self.assertEqual(hash(t), hash(fuse.Type.parse("tensor<2x?x8xf32>",
                                                       self.m.context)))
        self.assertEqual(fuse.Type.parse("i1").dtype, "bool")
        self.assertIsNone(fuse.Type.parse("tensor<*xf32>").shape)
        self.assertEqual(repr(t), "Type(tensor<2x?x8xf32>)")
        with self.assertRaises(fuse.Error):
            fuse.Type.parse("tensor<2xfoo>")

    def test_attribute_values(self):
        cases = {
            "5 : i64": ("integer", 5),
            "2.5 : f32": ("float", 2.5),
            "true": ("bool", True),
            "unit": ("unit", True),
            '"hi"': ("string", "hi"),
            "[1 : i64, \"a\"]": ("array", [1, "a"]),
            "{a = 1 : i64, b}": ("dict", {"a": 1, "b": True}),
            "@f::@g": ("symbol_ref", "@f::@g"),
            "array<i64: 1, 2, 3>": ("dense_array", [1, 2, 3]),
        }
        for text, (kind, value) in cases.items():
            a = fuse.Attribute.parse(text)
            self.assertEqual(a.kind, kind, text)
            self.assertEqual(a.value, value, text)
        d = fuse.Attribute.parse("dense<[[1.0, 2.0], [3.0, 4.0]]> : "
                                 "tensor<2x2xf32>")
        self.assertEqual(d.kind, "dense")
        self.assertEqual(str(d.type), "tensor<2x2xf32>")
        np.testing.assert_array_equal(
            d.value, np.array([[1, 2], [3, 4]], np.float32))
        self.assertEqual(d.value.dtype, np.float32)
        splat = fuse.Attribute.parse("dense<7> : tensor<3xi32>").value
        np.testing.assert_array_equal(splat, np.full(3, 7, np.int32))
        with self.assertRaises(fuse.Error):
            fuse.Attribute.parse("dense<")

    def test_onnx_locations(self):
        m = fuse.Module.read(MLP_ONNX)
        body = m.functions[0].regions[0].blocks[0]
        op = [o for o in body if o.name == "graph.matmul"][0]
        loc = op.location
        self.assertEqual(loc.kind, "fused")
        self.assertEqual(loc.file, MLP_ONNX)
        self.assertEqual(loc.line, 0)
        (named,) = loc.children
        self.assertEqual(named.kind, "name")
        self.assertEqual(named.name, "/fc1/Gemm")
        self.assertEqual(loc.position, MLP_ONNX + ": /fc1/Gemm")


class DiagnosticHandlerTest(unittest.TestCase):
    def test_handler_sees_and_claims(self):
        ctx = fuse.Context()
        seen = []

        def handler(d):
            seen.append(d)
            return True

        ctx.attach_diagnostic_handler(handler)
        bad = ADD_RELU.replace("graph.relu", "graph.frob")
        with self.assertRaises(fuse.Error) as cm:
            fuse.Module.parse(bad, ctx, name="h.fuse")
        # The handler claimed the error: the exception says so, and the
        # handler has it with its location.
        self.assertEqual(cm.exception.diagnostics, [])
        self.assertIn("claimed by a diagnostic handler", str(cm.exception))
        self.assertEqual(len(seen), 1)
        self.assertEqual(seen[0].location.line, 3)
        self.assertIn("h.fuse:3:8: error:", str(seen[0]))
        ctx.detach_diagnostic_handler(handler)
        with self.assertRaises(ValueError):
            ctx.detach_diagnostic_handler(handler)
        with self.assertRaises(fuse.Error) as cm:
            fuse.Module.parse(bad, ctx)
        self.assertEqual(len(cm.exception.diagnostics), 1)

    def test_handler_that_declines_and_one_that_raises(self):
        ctx = fuse.Context()
        ctx.attach_diagnostic_handler(lambda d: False)
        bad = ADD_RELU.replace("graph.relu", "graph.frob")
        with self.assertRaises(fuse.Error) as cm:
            fuse.Module.parse(bad, ctx)
        self.assertEqual(len(cm.exception.diagnostics), 1)

        def boom(d):
            raise KeyError("from the handler")
        ctx.attach_diagnostic_handler(boom)
        with self.assertRaises(KeyError):
            fuse.Module.parse(bad, ctx)


class LifetimeTest(unittest.TestCase):
    def test_module_keeps_context_and_ops_keep_module(self):
        ctx = fuse.Context()
        m = fuse.Module.parse(ADD_RELU, ctx)
        del ctx
        gc.collect()
        op = m.functions[0]
        del m
        gc.collect()
        # The op keeps its module (and the context) alive.
        self.assertEqual(op.name, "func.func")
        self.assertIn("graph.add", str(op.module))
        t = op.attributes["function_type"].value
        del op
        gc.collect()
        self.assertEqual(t.kind, "function")
        self.assertIsInstance(t.context, fuse.Context)

    def test_stale_handles_after_a_pass(self):
        m = fuse.Module.parse(ADD_RELU)
        add = m.functions[0].regions[0].blocks[0].operations[0]
        fuse.PassManager.parse("builtin.module(func.func(fuse))",
                               m.context).run(m)
        with self.assertRaises(fuse.Error) as cm:
            add.name
        self.assertIn("stale", str(cm.exception))
        # Walking again works.
        names = [o.name for o in m.operation.walk()]
        self.assertIn("graph.fusion", names)

    def test_clone_is_independent(self):
        m = fuse.Module.parse(ADD_RELU)
        c = m.clone()
        fuse.PassManager.parse("builtin.module(func.func(fuse))",
                               m.context).run(m)
        self.assertIn("graph.fusion", str(m))
        self.assertNotIn("graph.fusion", str(c))

    def test_many_contexts(self):
        mods = [fuse.Module.parse(ADD_RELU) for _ in range(20)]
        self.assertEqual(len({id(m.context) for m in mods}), 20)
        self.assertEqual(len({str(m) for m in mods}), 1)


if __name__ == "__main__":
    unittest.main()
