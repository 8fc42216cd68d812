#!/usr/bin/env python3
"""The functions of one object that ran in a callgrind profile (`--demangle=no`), one linker
symbol per line in the order callgrind first names them, for lld's --symbol-ordering-file.

    functions.py CALLGRIND_OUT OBJECT_PATH > tvmrt.order
"""
import re
import sys

NAMED = re.compile(r"^(c?ob|c?fn)=\((\d+)\)(?: (.*))?$")


def main():
    out_file, obj = sys.argv[1], sys.argv[2]
    objects, functions, seen = {}, {}, {}
    current = None
    with open(out_file, errors="replace") as f:
        for line in f:
            m = NAMED.match(line.rstrip("\n"))
            if not m:
                continue
            kind, key, name = m.groups()
            table = objects if kind.endswith("ob") else functions
            if name:
                table[key] = name
            if kind == "ob":
                current = objects.get(key)
            elif kind == "fn" and current == obj:
                seen.setdefault(functions[key], None)
    # callgrind's own labels ("(below main)", "0x...") are no symbols.
    names = [n for n in seen if not n.startswith(("(", "0x"))]
    if not names:
        sys.exit(f"no function of {obj} in {out_file}")
    print("\n".join(names))


if __name__ == "__main__":
    main()
