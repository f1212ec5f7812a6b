"""Checks an ONNX file with Debian's python3-onnx, an implementation independent of ocr-c's writer, and prints what
tests/test_onnx.c compares: onnx.checker.check_model(full_check=True) (the checker, then shape inference in strict
mode with type checks), and then one line each for the IR version, the opsets, every graph input and output (name,
element type, dims with symbolic ones by name), the metadata and the count of each node type.

Usage: /usr/bin/python3 tools/check_onnx.py MODEL.onnx     (exit 1 with the checker's message when it fails)
"""
import sys

import onnx


def dims(value_info):
    out = []
    for d in value_info.type.tensor_type.shape.dim:
        out.append(d.dim_param if d.HasField("dim_param") else str(d.dim_value) if d.HasField("dim_value") else "?")
    return ",".join(out)


def main():
    model = onnx.load(sys.argv[1])
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # the checker's and shape inference's errors differ by version: report any
        print("check_model failed: %s" % e)
        return 1
    print("ir_version %d" % model.ir_version)
    for o in model.opset_import:
        print("opset '%s' %d" % (o.domain, o.version))
    print("producer %s %s" % (model.producer_name, model.producer_version))
    g = model.graph
    names = set(i.name for i in g.initializer)
    for v in g.input:
        if v.name not in names:
            print("input %s %d %s" % (v.name, v.type.tensor_type.elem_type, dims(v)))
    for v in g.output:
        print("output %s %d %s" % (v.name, v.type.tensor_type.elem_type, dims(v)))
    for p in model.metadata_props:
        print("meta %s=%s" % (p.key, p.value))
    counts = {}
    for n in g.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    print("nodes " + " ".join("%s=%d" % kv for kv in sorted(counts.items())))
    print("initializers %d floats %d" % (len(g.initializer), sum(len(i.raw_data) // 4 for i in g.initializer)))
    print("check_model ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
