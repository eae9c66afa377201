#!/usr/bin/env bash
# The six rows of bench/RESULTS.md §3 by callgrind, instructions per call:
#   cargo bench -p retry-bench --bench steady --no-run    # prints the binary's path
#   bench/rows.sh target/release/deps/steady-HASH
#   bench/rows.sh target/release/deps/steady-HASH "happy sync: named policy, #[retry]" ...
#                                                      # other rows of `steady` (issue 42's)
# Each row is its own run of 4,000,000 calls: the sync rows count the variant function
# inclusive, the async rows the whole run (`steady::main::{{closure}}`), divided by 4,000,000.
set -euo pipefail
bin=$1
shift
rows=("$@")
if [[ ${#rows[@]} -eq 0 ]]; then
    rows=("happy sync: #[retry]" "happy sync: Retrier" "happy async: #[retry]"
        "one failure sync: #[retry]" "one failure sync: Retrier" "one failure async: #[retry]")
fi
for row in "${rows[@]}"; do
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" --bench "$row" >/dev/null 2>&1
    if [[ $row == *async* ]]; then pattern='steady::main::\{\{closure\}\}'; else pattern='steady::variants::'; fi
    count=$(callgrind_annotate --inclusive=yes "$out" 2>/dev/null | grep -E "\?\?\?:$pattern" | head -1 | awk '{gsub(",", "", $1); print $1}')
    rm -f "$out"
    python3 -c "import sys; print(f'{sys.argv[1]:42s} {int(sys.argv[2]) / 4e6:.1f}')" "$row" "$count"
done
