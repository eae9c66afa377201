#!/usr/bin/env python3
"""Lines of a crate's source at a commit, without its unit tests (a `#[cfg(test)] mod tests` at
the end of a file): `python3 bench/lines.py REV PATH`, e.g. `python3 bench/lines.py HEAD
retry-runtime/src`. Prints all lines and the lines of code (no blank lines, no comments)."""
import sys,subprocess,re
rev,path=sys.argv[1],sys.argv[2]
files=subprocess.run(["git","ls-tree","-r","--name-only",rev,path],capture_output=True,text=True).stdout.split()
total=code=0
for f in files:
    if not f.endswith(".rs"): continue
    s=subprocess.run(["git","show",f"{rev}:{f}"],capture_output=True,text=True).stdout
    m=re.search(r"\n#\[cfg\(test\)\]\nmod tests", s)
    if m: s=s[:m.start()]
    lines=s.split("\n")
    total+=len(lines)
    code+=sum(1 for l in lines if l.strip() and not l.strip().startswith("//"))
print(f"{path}@{rev}: {total} lines without unit tests, {code} of code (no comments, no blank lines)")
