#!/usr/bin/env python3
"""fop-delta.py BEFORE.json AFTER.json: the io-stats fop calls between two statedumps.

Reads two `xlfs volume statedump ... --json` documents of the same host (a mount or a brick)
and prints one line of key=value tokens: `xlator=NAME total=N FOP=N ...`, the calls each fop
made between the two dumps, from the first io-stats translator of the graph (the topmost one:
on a mount, what the FUSE host sent down; on a brick, what arrived from the wire). Used by
bench/run.sh for W6 (dbench), whose execute phase the two dumps bracket. Fails (exit 1, the
reason on stderr) when a dump has no io-stats fop table or the two name different graphs'
translators, rather than printing numbers that mean something else.
"""
import json
import sys


def iostats(doc, path=""):
    """(path, fops) of every object with a `fops` table of {name: {calls: N}}, in order."""
    out = []
    if isinstance(doc, dict):
        f = doc.get("fops")
        if isinstance(f, dict) and all(isinstance(v, dict) and "calls" in v for v in f.values()):
            out.append((path, f))
        for k, v in doc.items():
            if k != "fops":
                out.extend(iostats(v, f"{path}/{k}"))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.extend(iostats(v, f"{path}/{i}"))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: fop-delta.py BEFORE.json AFTER.json")
    docs = []
    for p in sys.argv[1:]:
        with open(p) as f:
            docs.append(json.load(f))
    a, b = iostats(docs[0]), iostats(docs[1])
    if not a or not b:
        print(f"fop-delta.py: no io-stats fop table in {sys.argv[1 if not a else 2]}", file=sys.stderr)
        sys.exit(1)
    (pa, fa), (pb, fb) = a[0], b[0]
    if pa != pb:
        print(f"fop-delta.py: the first io-stats is {pa} before and {pb} after (graph switched?)", file=sys.stderr)
        sys.exit(1)
    delta = {}
    for fop, v in fb.items():
        d = int(v.get("calls", 0)) - int(fa.get(fop, {}).get("calls", 0))
        if d < 0:
            print(f"fop-delta.py: {fop} calls went down ({pa}: counters reset?)", file=sys.stderr)
            sys.exit(1)
        if d > 0:
            delta[fop] = d
    name = pa.strip("/").replace(" ", "_") or "root"
    toks = [f"xlator={name}", f"total={sum(delta.values())}"]
    toks += [f"{k}={v}" for k, v in sorted(delta.items(), key=lambda kv: -kv[1])]
    print(" ".join(toks))


if __name__ == "__main__":
    main()
