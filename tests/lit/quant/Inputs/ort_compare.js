// Runs an ONNX model with ONNX Runtime (onnxruntime-node) on seeded
// inputs and writes DIR/input_N.npy and DIR/output_N.npy (f32 only), so
// that `fuse-run MODEL --input ... --compare DIR --rtol 0 --atol 0` says
// whether fuse's result equals ORT's bit for bit.
//   NODE_PATH=<dir with onnxruntime-node> node ort_compare.js MODEL DIR SHAPE...
// SHAPE: one per graph input, e.g. 1x3x8x8. Inputs: uniform in [-4, 4)
// from a fixed linear congruential generator.
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function npy(arr, shape) {
  let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
               shape.join(', ') + (shape.length === 1 ? ',' : '') + '), }';
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const h = Buffer.alloc(10);
  h.write('\x93NUMPY', 0, 'latin1');
  h[6] = 1; h[7] = 0;
  h.writeUInt16LE(header.length, 8);
  return Buffer.concat([h, Buffer.from(header, 'latin1'),
                        Buffer.from(arr.buffer, arr.byteOffset, arr.byteLength)]);
}

async function main() {
  const [model, dir, ...shapes] = process.argv.slice(2);
  const opts = {graphOptimizationLevel: 'all', intraOpNumThreads: 1};
  const sess = await ort.InferenceSession.create(model, opts);
  let seed = 12345;
  const feeds = {};
  sess.inputNames.forEach((name, k) => {
    const shape = shapes[k].split('x').map(Number);
    const n = shape.reduce((a, b) => a * b, 1);
    const x = new Float32Array(n);
    for (let i = 0; i < n; ++i) {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      x[i] = (seed / 2147483648) * 8 - 4;
    }
    feeds[name] = new ort.Tensor('float32', x, shape);
    fs.writeFileSync(path.join(dir, `input_${k}.npy`), npy(x, shape));
  });
  const out = await sess.run(feeds);
  sess.outputNames.forEach((name, k) => {
    const t = out[name];
    fs.writeFileSync(path.join(dir, `output_${k}.npy`), npy(t.data, t.dims));
  });
  console.log(`ort: ${sess.outputNames.length} output(s) written to ${dir}`);
}
main().catch((e) => { console.error(e); process.exit(1); });
