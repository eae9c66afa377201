#!/usr/bin/env bash
# Compile cost of #[retry], measured outside CI: `bash bench/compile-cost.sh [--release]`.
#
# 1. A clean build of a small crate that retries one sync and one async function with #[retry],
#    against the same crate written with backon (each crate with default features, the way a
#    user adds it), and the number of packages each pulls in.
# 2. The cost of 200 annotated functions: building a crate of 200 #[retry] functions (100 sync,
#    100 async) against the same 200 functions without the attribute, dependencies already
#    built, and rustc's own macro-expansion time for both (-Zself-profile is nightly-only, so
#    -Ztime-passes through RUSTC_BOOTSTRAP=1 on the stable compiler).
#
# Everything happens in a temporary directory with its own target directories; crates.io must
# be reachable (or the packages already in ~/.cargo). Wall time depends on what else the machine
# runs, so the CPU time (user + sys) is printed beside it.
set -euo pipefail

profile_flag=""
profile_name="debug"
if [[ "${1:-}" == "--release" ]]; then
    profile_flag="--release"
    profile_name="release"
fi

workspace="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CARGO_INCREMENTAL=0
export CARGO_TERM_COLOR=never
# No lint output: rendering diagnostics is not the cost being measured.
export RUSTFLAGS="-A warnings"

# Runs a command and prints "wall user+sys" in seconds.
measure() {
    local out
    out="$( { TIMEFORMAT='%R %U %S'; time "$@" >/dev/null 2>&1; } 2>&1 )"
    awk '{ printf "%.1f s | %.1f s", $1, $2 + $3 }' <<<"$out"
}

packages() {
    (cd "$1" && cargo tree -e normal,build --prefix none 2>/dev/null | sed 's/ (\*)$//' | sort -u | wc -l)
}

new_crate() {
    local dir="$work/$1"
    mkdir -p "$dir/src"
    cat >"$dir/Cargo.toml" <<TOML
[package]
name = "$1"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
$2

[workspace]
TOML
    echo "$dir"
}

error_type='
#[derive(Debug)]
pub struct Busy;
impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'"'"'_>) -> std::fmt::Result { f.write_str("busy") }
}
impl std::error::Error for Busy {}
pub fn is_busy(_: &Busy) -> bool { true }
'

# --- 1. one small crate, two ways --------------------------------------------------------------
small_retry="$(new_crate small-retry "retry-runtime = { path = \"$workspace/retry-runtime\" }")"
cat >"$small_retry/src/lib.rs" <<RS
$error_type
use retry_runtime::retry;

#[retry(max = 3, base = "100ms", on = is_busy)]
pub fn check(x: u64) -> Result<u64, Busy> { if x == 0 { Err(Busy) } else { Ok(x) } }

#[retry(max = 3, base = "100ms", on = is_busy)]
pub async fn check_async(x: u64) -> Result<u64, Busy> { if x == 0 { Err(Busy) } else { Ok(x) } }
RS

small_backon="$(new_crate small-backon 'backon = "1.6.0"')"
cat >"$small_backon/src/lib.rs" <<RS
$error_type
use backon::{BlockingRetryable, ExponentialBuilder, Retryable};
use std::time::Duration;

const POLICY: ExponentialBuilder = ExponentialBuilder::new()
    .with_min_delay(Duration::from_millis(100))
    .with_max_times(3)
    .with_jitter();

fn body(x: u64) -> Result<u64, Busy> { if x == 0 { Err(Busy) } else { Ok(x) } }

pub fn check(x: u64) -> Result<u64, Busy> {
    (|| body(x)).retry(POLICY).when(is_busy).call()
}

pub async fn check_async(x: u64) -> Result<u64, Busy> {
    (|| async { body(x) }).retry(POLICY).when(is_busy).await
}
RS

for dir in "$small_retry" "$small_backon"; do
    (cd "$dir" && cargo fetch -q && cargo generate-lockfile -q)
done

echo "## Clean $profile_name build of a small crate (rustc $(rustc --version | cut -d' ' -f2), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
echo
echo "| crate | packages built | wall | CPU (user + sys) |"
echo "|---|---:|---:|---:|"
for dir in "$small_retry" "$small_backon"; do
    name="$(basename "$dir")"
    # Minus one: the crate itself.
    count=$(( $(packages "$dir") - 1 ))
    (cd "$dir" && cargo clean -q)
    echo "| $name | $count | $(cd "$dir" && measure cargo build $profile_flag) |"
done

echo
echo "Slowest units of the clean builds (cargo --timings, seconds):"
for dir in "$small_retry" "$small_backon"; do
    (cd "$dir" && cargo clean -q && cargo build -q $profile_flag --timings >/dev/null 2>&1)
    report="$(ls -t "$dir"/target/cargo-timings/cargo-timing-*.html | head -1)"
    # UNIT_DATA in the report has one "key": value per line.
    units="$(awk -F': ' '/"name":/ { name = $2 } /"target":/ { target = $2 }
        /"duration":/ { gsub(/[",]/, "", name); gsub(/[",]/, "", target); d = $2; gsub(/,/, "", d);
                        print d, name target }' "$report" \
        | sort -rn | head -6 | awk '{ printf "%s %.1f, ", $2, $1 }')"
    echo "- $(basename "$dir"): ${units%, }"
done

# --- 2. 200 annotated functions ----------------------------------------------------------------
many_retry="$(new_crate many-retry "retry-runtime = { path = \"$workspace/retry-runtime\" }")"
many_plain="$(new_crate many-plain "retry-runtime = { path = \"$workspace/retry-runtime\" }")"
{
    echo "$error_type"
    echo "use retry_runtime::retry;"
    for i in $(seq 1 100); do
        echo "#[retry(max = 3, base = \"${i}ms\", jitter = full, on = is_busy)]"
        echo "pub fn sync_$i(x: u64) -> Result<u64, Busy> { if x == $i { Err(Busy) } else { Ok(x + $i) } }"
        echo "#[retry(max = 3, base = \"${i}ms\", on = is_busy)]"
        echo "pub async fn async_$i(x: u64) -> Result<u64, Busy> { if x == $i { Err(Busy) } else { Ok(x + $i) } }"
    done
} >"$many_retry/src/lib.rs"
grep -v '^#\[retry' "$many_retry/src/lib.rs" | sed 's/^use retry_runtime::retry;$/use retry_runtime as _;/' >"$many_plain/src/lib.rs"

echo
echo "## 200 functions (100 sync, 100 async), dependencies already built ($profile_name)"
echo
echo "| crate | build of the crate alone: wall | CPU (user + sys) | rustc macro expansion (-Ztime-passes) |"
echo "|---|---:|---:|---:|"
for dir in "$many_plain" "$many_retry"; do
    name="$(basename "$dir")"
    (cd "$dir" && cargo fetch -q && cargo build -q $profile_flag)
    touch "$dir/src/lib.rs"
    timing="$(cd "$dir" && measure cargo build $profile_flag)"
    touch "$dir/src/lib.rs"
    expand="$(cd "$dir" && RUSTC_BOOTSTRAP=1 cargo rustc -q $profile_flag --lib -- -Ztime-passes 2>&1 \
        | awk '/expand_crate/ { print $2 }' | tr -d ';' | head -1)"
    echo "| $name | $timing | ${expand:-?} s |"
done
