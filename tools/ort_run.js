#!/usr/bin/env node
// ort_run.js - runs an ONNX model in ONNX Runtime (npm onnxruntime-node, CPU; ./build.sh test and ./build.sh bench
// install it under build/ort) on raw float32 tensors: the independent runtime tests/test_onnx.c compares ocr-c's
// export against, and the inference peer of bench/bench_infer.c.
//
//   node tools/ort_run.js [--threads N] MODEL IN DIMS OUT [IN DIMS OUT ...]
//       runs each IN (raw little-endian float32, DIMS like 2,3,256,320) through the model's first input and writes
//       every output to OUT.<output name>.f32, printing "OUT <name> <dims> ..." per run.
//   node tools/ort_run.js --layers [--threads N] MODEL IN DIMS
//       per-node times: ONNX Runtime's profiler over 1 warm-up and 5 timed runs of IN, the median of each node's
//       5 kernel times in ms, one line per node in graph order, then the sum (the counterpart of
//       bench_train --layers; a node's name is the layer ocr-c's export named it after, with ORT's suffixes)
//   node tools/ort_run.js --serve [--threads N] MODEL
//       the benchmark peer: one command a line on stdin, one answer line each on stdout ("error: ..." on failure):
//         load IN DIMS   -> "ok"         the input of the runs that follow
//         run            -> seconds      one session.run, timed around the call
//         save OUT       -> "ok"         the last run's outputs, as above
//         quit
// The session: N intra-op threads (default 2), 1 inter-op thread, sequential execution, every graph optimisation.
// build/ort is found next to this script's directory; OCR_ORT_MODULE overrides the module's path.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const readline = require('readline');

function loadOrt() {
    const where = process.env.OCR_ORT_MODULE || path.join(__dirname, '..', 'build', 'ort', 'node_modules', 'onnxruntime-node');
    try {
        return require(where);
    } catch (e) {
        console.error(`ort_run.js: cannot load onnxruntime-node from ${where} (./build.sh test installs it): ${e.message}`);
        process.exit(3);
    }
}

function readInput(file, dimsText, ort) {
    const dims = dimsText.split(',').map(Number);
    if (dims.some((d) => !Number.isInteger(d) || d < 1)) throw new Error(`bad dims '${dimsText}'`);
    const bytes = fs.readFileSync(file);
    const n = dims.reduce((a, b) => a * b, 1);
    if (bytes.length !== 4 * n) throw new Error(`${file} holds ${bytes.length} bytes, dims ${dimsText} need ${4 * n}`);
    // a copy: the file's buffer need not be 4-byte aligned
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = bytes.readFloatLE(4 * i);
    return new ort.Tensor('float32', data, dims);
}

function writeOutputs(results, names, prefix) {
    const parts = [prefix];
    for (const name of names) {
        const t = results[name];
        const buf = Buffer.alloc(4 * t.data.length);
        for (let i = 0; i < t.data.length; i++) buf.writeFloatLE(t.data[i], 4 * i);
        fs.writeFileSync(`${prefix}.${name}.f32`, buf);
        parts.push(name, t.dims.join(','));
    }
    return parts.join(' ');
}

// The profile's node events ("<node>_kernel_time"), the last `runs` of each node: their median, in graph order.
function printLayers(dir, runs) {
    const file = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => path.join(dir, f))[0];
    const events = JSON.parse(fs.readFileSync(file, 'utf8'));
    fs.rmSync(dir, { recursive: true, force: true });
    const times = new Map();
    const ops = new Map();
    for (const e of events) {
        if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
        const name = e.name.slice(0, -'_kernel_time'.length);
        if (!times.has(name)) { times.set(name, []); ops.set(name, e.args.op_name); }
        times.get(name).push(e.dur / 1000);
    }
    let total = 0;
    for (const [name, all] of times) {
        const last = all.slice(-runs).sort((a, b) => a - b);
        const median = last[Math.floor(last.length / 2)];
        total += median;
        console.log(`${name.padEnd(40)} ${String(ops.get(name)).padEnd(20)} ${median.toFixed(2).padStart(9)}`);
    }
    console.log(`${'total'.padEnd(40)} ${''.padEnd(20)} ${total.toFixed(2).padStart(9)}`);
}

async function main() {
    const args = process.argv.slice(2);
    let threads = 2;
    let serve = false;
    let layers = false;
    for (;;) {
        if (args[0] === '--threads') { threads = Number(args[1]); args.splice(0, 2); }
        else if (args[0] === '--serve') { serve = true; args.shift(); }
        else if (args[0] === '--layers') { layers = true; args.shift(); }
        else break;
    }
    const badArgs = serve ? args.length !== 1 : layers ? args.length !== 3 : args.length < 4 || (args.length - 1) % 3 !== 0;
    if (!Number.isInteger(threads) || threads < 1 || badArgs) {
        console.error('usage: node tools/ort_run.js [--threads N] MODEL IN DIMS OUT [IN DIMS OUT ...]\n' +
                      '       node tools/ort_run.js --layers [--threads N] MODEL IN DIMS\n' +
                      '       node tools/ort_run.js --serve [--threads N] MODEL');
        process.exit(2);
    }
    const ort = loadOrt();
    const options = {
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
    };
    let profileDir = null;
    if (layers) {
        profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort_layers_'));
        options.enableProfiling = true;
        options.profileFilePrefix = path.join(profileDir, 'profile');
    }
    const session = await ort.InferenceSession.create(args[0], options);
    const inputName = session.inputNames[0];
    if (layers) {
        const feeds = {};
        feeds[inputName] = readInput(args[1], args[2], ort);
        for (let r = 0; r < 6; r++) await session.run(feeds);
        session.endProfiling();
        printLayers(profileDir, 5);
        return;
    }
    if (!serve) {
        for (let i = 1; i < args.length; i += 3) {
            const feeds = {};
            feeds[inputName] = readInput(args[i], args[i + 1], ort);
            const results = await session.run(feeds);
            console.log(writeOutputs(results, session.outputNames, args[i + 2]));
        }
        return;
    }
    let feeds = null;
    let last = null;
    const rl = readline.createInterface({ input: process.stdin });
    for await (const line of rl) {
        const w = line.trim().split(/\s+/);
        try {
            if (w[0] === 'quit') break;
            if (w[0] === 'load' && w.length === 3) {
                feeds = {};
                feeds[inputName] = readInput(w[1], w[2], ort);
                last = null;
                console.log('ok');
            } else if (w[0] === 'run' && feeds) {
                const t0 = process.hrtime.bigint();
                last = await session.run(feeds);
                console.log((Number(process.hrtime.bigint() - t0) * 1e-9).toFixed(6));
            } else if (w[0] === 'save' && w.length === 2 && last) {
                writeOutputs(last, session.outputNames, w[1]);
                console.log('ok');
            } else {
                console.log(`error: cannot '${line}' now (load IN DIMS, run, save OUT, quit)`);
            }
        } catch (e) {
            console.log(`error: ${String(e.message).split('\n')[0]}`);
        }
    }
}

main().catch((e) => {
    console.error(`ort_run.js: ${e.message}`);
    process.exit(1);
});
