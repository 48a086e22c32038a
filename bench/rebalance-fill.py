#!/usr/bin/env python3
"""rebalance-fill.py fill|check|linkfiles ...: the corpus of bench/rebalance.sh.

  fill DIR FILES DIRS KIB  write FILES files over DIRS directories under DIR, of KIB KiB
                           ("MIN-MAX": sizes spread over the range) (deterministic: the same
                           arguments give the same tree); prints the file count and bytes
  check DIR FILES DIRS KIB read every file back and compare it with what fill wrote; exit 1
                           (the differences on stderr) on any missing, extra or changed file
  linkfiles XATTR BRICK... count the files on the bricks that carry XATTR (DHT link files);
                           the bricks' own metadata directories are skipped
"""
import hashlib
import os
import sys


def corpus(files, dirs, kib):
    """(relative path, contents) of every file of the corpus, in order."""
    lo, _, hi = kib.partition("-")
    lo, hi = int(lo) * 1024, int(hi or lo) * 1024
    if not 0 < lo <= hi:
        sys.exit(f"sizes {kib}: want MIN-MAX KiB, 0 < MIN <= MAX")
    for i in range(files):
        name = f"d{i % dirs:03}/f{i:06}"
        seed = hashlib.sha256(name.encode()).digest()
        size = lo + int.from_bytes(seed[:4], "little") % (hi - lo + 1)
        block = hashlib.sha256(seed).digest() * 128  # 4 KiB
        yield name, (block * (size // len(block) + 1))[:size]


def fill(root, files, dirs, kib):
    for d in range(dirs):
        os.makedirs(os.path.join(root, f"d{d:03}"), exist_ok=True)
    total = 0
    for name, data in corpus(files, dirs, kib):
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)
        total += len(data)
    print(f"{files} {total}")


def check(root, files, dirs, kib):
    bad = []
    want = set()
    for name, data in corpus(files, dirs, kib):
        want.add(name)
        try:
            with open(os.path.join(root, name), "rb") as f:
                got = f.read()
        except OSError as e:
            bad.append(f"{name}: {e.strerror}")
            continue
        if got != data:
            bad.append(f"{name}: {len(got)} bytes differ from the {len(data)} written")
    for d in range(dirs):
        for n in os.listdir(os.path.join(root, f"d{d:03}")):
            if f"d{d:03}/{n}" not in want:
                bad.append(f"d{d:03}/{n}: not written by fill")
    for b in bad[:20]:
        print(f"check: {b}", file=sys.stderr)
    if bad:
        sys.exit(f"check: {len(bad)} files wrong")
    print(f"check: {files} files read back intact")


def linkfiles(xattr, bricks):
    n = 0
    for b in bricks:
        for top, subdirs, names in os.walk(b):
            if top == b:
                subdirs[:] = [s for s in subdirs if not s.startswith(".")]
            for name in names:
                p = os.path.join(top, name)
                try:
                    if xattr in os.listxattr(p, follow_symlinks=False):
                        n += 1
                except OSError:
                    pass
    print(n)


def main():
    a = sys.argv[1:]
    if len(a) == 5 and a[0] in ("fill", "check"):
        (fill if a[0] == "fill" else check)(a[1], int(a[2]), int(a[3]), a[4])
    elif len(a) >= 3 and a[0] == "linkfiles":
        linkfiles(a[1], a[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
