#!/usr/bin/env python3
"""Where the instructions of a function come from after LLVM's passes, read from the debug
locations of an `--emit=llvm-ir` file: `python3 bench/ir-inlined.py FILE.ll REGEX [ROWS]`.

For the functions whose symbol matches REGEX, it counts each instruction (not labels or debug
records) by the function its code was written in (the innermost scope of its location), and by
the call that brought it into the function (the outermost inlined call). Instructions without a
location are mostly the stack slots (allocas) of the functions inlined at opt-level 0. Used by
`bench/compile-cost.sh --profile`."""
import collections
import re
import subprocess
import sys

path, pattern = sys.argv[1], re.compile(sys.argv[2])
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 15

meta = {}
functions = []  # (symbol, [location id or None per instruction])
current = None
with open(path) as ir:
    for line in ir:
        if line.startswith("define"):
            symbol = re.search(r'@"?([^"(]+)"?\(', line).group(1)
            current = (symbol, []) if pattern.search(symbol) else None
            continue
        if current is not None:
            if line.startswith("}"):
                functions.append(current)
                current = None
            elif line.startswith("  ") and not line.lstrip().startswith("#dbg"):
                found = re.search(r"!dbg !(\d+)", line)
                current[1].append(int(found.group(1)) if found else None)
            continue
        node = re.match(r"!(\d+) = (?:distinct )?!(\w+)\((.*)\)$", line.rstrip())
        if node:
            meta[int(node.group(1))] = (node.group(2), node.group(3))


def field(body, key):
    found = re.search(key + r': (?:!(\d+)|"([^"]*)")', body)
    if not found:
        return None
    return int(found.group(1)) if found.group(1) else found.group(2)


def function_of(scope):
    while scope is not None:
        kind, body = meta[scope]
        if kind == "DISubprogram":
            return field(body, "linkageName") or field(body, "name")
        scope = field(body, "scope")
    return "?"


innermost, outermost = collections.Counter(), collections.Counter()
for _, locations in functions:
    for location in locations:
        if location is None:
            innermost["(no location: stack slots and the like)"] += 1
            outermost["(no location: stack slots and the like)"] += 1
            continue
        body = meta[location][1]
        innermost[function_of(field(body, "scope"))] += 1
        # Follow `inlinedAt` to the call written in the function itself.
        top = None
        while (at := field(body, "inlinedAt")) is not None:
            if field(meta[at][1], "inlinedAt") is None:
                top = function_of(field(body, "scope"))
            body = meta[at][1]
        outermost[top or "(the function's own code)"] += 1


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        names = out.split("\n")[: len(names)]
    except (OSError, subprocess.CalledProcessError):
        pass
    return [re.sub(r"::h[0-9a-f]{16}$", "", n)[:160] for n in names]


count = max(len(functions), 1)
total = sum(innermost.values())
print(f"{len(functions)} function(s) matched; instructions per function: {total / count:.0f}")
for title, counter in (
    ("by the function the code was written in (innermost)", innermost),
    ("by the call that brought it in (outermost)", outermost),
):
    print(f"\n{title}:")
    top = counter.most_common(rows)
    for (_, n), name in zip(top, demangle([k for k, _ in top])):
        print(f"{n / count:8.0f}  {name}")
