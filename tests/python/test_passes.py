"""Pass managers from Python: the pipelines and options of fuse-opt's
--pass-pipeline, their errors, remarks, IR dumps, timing and
statistics, and the registry of passes and named pipelines."""
import os
import subprocess
import unittest

from common import ADD_RELU, BUILD, MLP_ONNX, fuse, np

REDUNDANT = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.exp %a : tensor<4xf32>
  %1 = graph.exp %a : tensor<4xf32>
  %2 = graph.add %0, %1 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %3 = graph.neg %a : tensor<4xf32>
  return %2 : tensor<4xf32>
}
"""


def fuse_opt(path, pipeline):
    return subprocess.run(
        [BUILD + "/bin/fuse-opt", path, "--pass-pipeline=" + pipeline],
        check=True, capture_output=True, text=True).stdout


class PassManagerTest(unittest.TestCase):
    def test_canonicalize_cse(self):
        m = fuse.Module.parse(REDUNDANT)
        pm = fuse.PassManager.parse("builtin.module(canonicalize,cse)",
                                    m.context)
        # Printed with every option, and read back to the same pipeline.
        text = str(pm)
        self.assertTrue(text.startswith("builtin.module(canonicalize{"))
        self.assertTrue(text.endswith("},cse)"))
        self.assertEqual(str(fuse.PassManager.parse(text, m.context)), text)
        self.assertEqual(pm.run(m), [])
        names = [o.name for o in m.operation.walk()]
        self.assertEqual(names.count("graph.exp"), 1)
        self.assertNotIn("graph.neg", names)
        x = np.array([0.0, 1.0, -1.0, 2.0], np.float32)
        np.testing.assert_allclose(fuse.interpret(m, x), 2 * np.exp(x),
                                   rtol=1e-6)

    @unittest.skipUnless(os.path.exists(BUILD + "/bin/fuse-opt"),
                         "no fuse-opt in this build")
    def test_same_result_as_fuse_opt(self):
        pipeline = ("builtin.module(canonicalize,cse,recognize-composites,"
                    "func.func(fuse{target=cpu}),lower-graph-to-loop)")
        m = fuse.Module.read(MLP_ONNX)
        fuse.PassManager.parse(pipeline, m.context).run(m)
        self.assertEqual(str(m), fuse_opt(MLP_ONNX, pipeline))

    def test_nested_and_named_pipelines(self):
        m = fuse.Module.parse(REDUNDANT)
        pm = fuse.PassManager.parse("func.func(cse)", m.context)
        pm.add("graph-optimize")
        pm.run(m)
        self.assertEqual([o.name for o in m.operation.walk()].count("graph.exp"),
                         1)
        names = {p["name"] for p in fuse.pipelines()}
        self.assertIn("graph-optimize", names)

    def test_fusion_remarks_are_returned(self):
        m = fuse.Module.parse(ADD_RELU, name="r.fuse")
        pm = fuse.PassManager.parse(
            "builtin.module(func.func(fuse{remarks=true target=cpu}))",
            m.context)
        remarks = pm.run(m)
        self.assertEqual([r.message for r in remarks],
                         ["fused into group 0 (loop, 2 ops)"] * 2)
        self.assertEqual([r.location.line for r in remarks], [2, 3])
        self.assertEqual(remarks[0].severity, "remark")
        self.assertEqual(str(remarks[0]).splitlines()[0],
                         "r.fuse:2:8: remark: fused into group 0 (loop, 2 ops)")
        self.assertIn("graph.fusion", str(m))

    def test_pipeline_errors(self):
        with self.assertRaises(fuse.Error) as cm:
            fuse.PassManager.parse("builtin.module(canonicalize,no-such-pass)")
        e = cm.exception
        self.assertIn("no-such-pass", e.message)
        self.assertEqual(e.location.file, "<pipeline>")
        self.assertEqual(e.location.column, 29)
        self.assertIn("^", str(e))
        with self.assertRaises(fuse.Error) as cm:
            fuse.PassManager.parse("builtin.module(func.func(fuse{bogus=1}))")
        self.assertIn("bogus", cm.exception.message)
        with self.assertRaises(fuse.Error):
            fuse.PassManager.parse("builtin.module(cse")

    def test_failing_run(self):
        m = fuse.Module.parse(ADD_RELU)
        pm = fuse.PassManager.parse(
            "builtin.module(func.func(fuse{target=nowhere}))", m.context)
        with self.assertRaises(fuse.Error) as cm:
            pm.run(m)
        self.assertIn("unknown target 'nowhere'", cm.exception.message)
        # The module is still usable, and a good pipeline runs on it.
        fuse.PassManager.parse("builtin.module(cse)", m.context).run(m)
        self.assertTrue(m.verify())
        with self.assertRaises(TypeError):
            pm.run("not a module")
        with self.assertRaises(ValueError):
            pm.run(fuse.Module.parse(ADD_RELU))  # another context

    def test_ir_printing_timing_statistics(self):
        m = fuse.Module.parse(REDUNDANT)
        pm = fuse.PassManager.parse("builtin.module(canonicalize,cse)",
                                    m.context)
        pm.enable_ir_printing(after_all=True)
        pm.enable_timing()
        pm.run(m)
        dumps = pm.take_ir_dumps()
        self.assertIn("// -----// IR Dump After CSE (cse) //----- //", dumps)
        self.assertIn("graph.exp", dumps)
        self.assertEqual(pm.take_ir_dumps(), "")
        self.assertIn("cse", pm.timing().lower())
        self.assertIsInstance(pm.statistics(), str)
        pm.enable_verifier(False)
        pm.run(m)

    def test_registry(self):
        passes = {p["name"]: p for p in fuse.passes()}
        for name in ("canonicalize", "cse", "fuse", "lower-graph-to-loop",
                     "plan-memory"):
            self.assertIn(name, passes)
        opts = {o["name"]: o for o in passes["fuse"]["options"]}
        self.assertEqual(opts["remarks"]["kind"], "bool")
        self.assertEqual(passes["fuse"]["anchor"], "func.func")
        self.assertTrue(passes["cse"]["summary"])


if __name__ == "__main__":
    unittest.main()
