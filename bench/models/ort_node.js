// bench/models/ort_node.js - ONNX Runtime's CPU provider from Node.js, for
// machines without the onnxruntime Python package (Debian 12 has none):
//     npm install --prefix DIR onnxruntime-node --ignore-scripts
//     NODE_PATH=DIR/node_modules node ort_node.js MODEL INPUT.npy OUT.npy THREADS REPS
// (the install script only fetches GPU add-ons; the package carries the
// CPU library). Runs MODEL on the one input (a float32 or float16 .npy),
// writes its first output to OUT.npy, then times REPS runs after one
// warm-up and prints one JSON line: {"ms": median, "min_ms", "version"}.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

const DTYPES = {'<f4': ['float32', Float32Array], '<f2': ['float16', Uint16Array]};

function readNpy(path) {
  const b = fs.readFileSync(path);
  if (b.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${path}: not a .npy file`);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const off = (major === 1 ? 10 : 12) + hlen;
  const header = b.toString('latin1', major === 1 ? 10 : 12, off);
  const descr = /'descr': *'([^']+)'/.exec(header)[1];
  if (/'fortran_order': *True/.test(header)) throw new Error(`${path}: Fortran order`);
  const shape = /'shape': *\(([^)]*)\)/.exec(header)[1].split(',')
      .map((s) => s.trim()).filter((s) => s).map(Number);
  if (!DTYPES[descr]) throw new Error(`${path}: dtype ${descr} not supported`);
  const [type, Arr] = DTYPES[descr];
  const bytes = b.subarray(off);
  const data = new Arr(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
  return {type, descr, shape, data};
}

function writeNpy(path, tensor) {
  const descr = tensor.type === 'float16' ? '<f2' : '<f4';
  const dims = tensor.dims.join(', ') + (tensor.dims.length === 1 ? ',' : '');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims}), }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const d = tensor.data;
  fs.writeFileSync(path, Buffer.concat([pre, Buffer.from(header, 'latin1'),
    Buffer.from(d.buffer, d.byteOffset, d.byteLength)]));
}

async function main() {
  const [model, input, out, threads, reps] = process.argv.slice(2);
  if (!reps) throw new Error('usage: ort_node.js MODEL INPUT.npy OUT.npy THREADS REPS');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  const x = readNpy(input);
  const feeds = {[session.inputNames[0]]: new ort.Tensor(x.type, x.data, x.shape)};
  const first = await session.run(feeds);
  writeNpy(out, first[session.outputNames[0]]);
  const ms = [];
  for (let i = 0; i < Number(reps); ++i) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  ms.sort((a, b) => a - b);
  let version = 'unknown';
  try {
    version = require('onnxruntime-node/package.json').version;
  } catch (e) { /* an older package without exports */ }
  console.log(JSON.stringify({ms: ms[ms.length >> 1], min_ms: ms[0], version}));
}

main().catch((e) => { console.error(`ort_node.js: ${e.message}`); process.exit(1); });
