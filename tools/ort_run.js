#!/usr/bin/env node
// ort_run.js - runs an ONNX model in ONNX Runtime (npm onnxruntime-node, CPU; ./build.sh test and ./build.sh bench
// install it under build/ort) on raw float32 tensors: the independent runtime tests/test_onnx.c compares ocr-c's
// export against, and the inference peer of bench/bench_infer.c.
//
//   node tools/ort_run.js [--threads N] MODEL IN DIMS OUT [IN DIMS OUT ...]
//       runs each IN (raw little-endian float32, DIMS like 2,3,256,320) through the model's first input and writes
//       every output to OUT.<output name>.f32, printing "OUT <name> <dims> ..." per run.
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

async function main() {
    const args = process.argv.slice(2);
    let threads = 2;
    let serve = false;
    for (;;) {
        if (args[0] === '--threads') { threads = Number(args[1]); args.splice(0, 2); }
        else if (args[0] === '--serve') { serve = true; args.shift(); }
        else break;
    }
    const badArgs = serve ? args.length !== 1 : args.length < 4 || (args.length - 1) % 3 !== 0;
    if (!Number.isInteger(threads) || threads < 1 || badArgs) {
        console.error('usage: node tools/ort_run.js [--threads N] MODEL IN DIMS OUT [IN DIMS OUT ...]\n' +
                      '       node tools/ort_run.js --serve [--threads N] MODEL');
        process.exit(2);
    }
    const ort = loadOrt();
    const session = await ort.InferenceSession.create(args[0], {
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
    });
    const inputName = session.inputNames[0];
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
