#!/usr/bin/env python3
"""In-graph cost of each kernel of a compiled model (docs/performance.md
entry 31): writes copies of the model in which the kernels of one entry
return right after griddepcontrol.wait, so that a decode step runs at the
same launch geometry, in the same CUDA graph, with those kernels empty. The
step time of a copy subtracted from the full model's is what that entry's
work costs inside the graph (its kernel boundaries stay); the copy with every
entry empty measures the boundaries alone. Not a correctness tool: the
outputs of an empty kernel are whatever its buffers held.

  empty_kernels.py DIR/NAME

reads DIR/NAME.{ptx,manifest.json} (fusion-compile output for sm_90, where
every kernel starts with griddepcontrol.wait) and writes, for each primary
entry E of the manifest (its batch variants emptied with it),
DIR/NAME_E.{ptx,manifest.json} with E shortened to its kernel index and kind
(e.g. smol_k2_decode_attention), and DIR/NAME_all.*; the manifest's ptx name
and FNV-1a hash are updated (docs/abi.md section 2). Prints the copies'
names, one per line."""
import json
import os
import re
import sys


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def empty_entries(ptx, entries):
    """`ptx` with a `ret` after the griddepcontrol.wait of each entry named."""
    parts = re.split(r"(?=\.visible \.entry )", ptx)
    done = set()
    for i, part in enumerate(parts):
        m = re.match(r"\.visible \.entry (\w+)\(", part)
        if not m or m.group(1) not in entries:
            continue
        wait = part.find("griddepcontrol.wait;")
        if wait < 0:
            sys.exit(f"{m.group(1)}: no griddepcontrol.wait (not an sm_90 build)")
        end = part.index("\n", wait) + 1
        parts[i] = part[:end] + "\tret;\n" + part[end:]
        done.add(m.group(1))
    missing = set(entries) - done
    if missing:
        sys.exit(f"entries not in the PTX: {sorted(missing)}")
    return "".join(parts)


def write_copy(base, tag, ptx, manifest, entries):
    name = os.path.basename(base) + "_" + tag
    text = empty_entries(ptx, entries)
    with open(f"{base}_{tag}.ptx", "w") as f:
        f.write(text)
    copy = dict(manifest, ptx=name + ".ptx", ptx_fnv1a64=fnv1a64(text.encode()))
    with open(f"{base}_{tag}.manifest.json", "w") as f:
        json.dump(copy, f, indent=1)
    print(name)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    base = sys.argv[1]
    with open(base + ".ptx") as f:
        ptx = f.read()
    with open(base + ".manifest.json") as f:
        manifest = json.load(f)
    groups = {}  # primary entry -> it and its variants' entries
    for k in manifest["kernels"]:
        groups.setdefault(k["entry"], {k["entry"]}).update(
            v["entry"] for v in k.get("variants", []))
    prefix = os.path.commonprefix(list(groups))
    prefix = prefix[:prefix.rfind("_") + 1]  # e.g. decode_step_
    for entry, entries in groups.items():
        write_copy(base, entry[len(prefix):], ptx, manifest, entries)
    write_copy(base, "all", ptx, manifest, set().union(*groups.values()))


if __name__ == "__main__":
    main()
