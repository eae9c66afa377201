#!/usr/bin/env bash
# Compile cost of #[retry] and retry_block!, beside backon, measured outside CI:
#
#   bash bench/compile-cost.sh [--release] [--profile] [--rounds N]
#
# 1. A clean build of a small crate that retries one sync and one async function with #[retry],
#    against the same crate written with backon (each with default features, the way a user adds
#    it), and the number of packages each pulls in.
# 2. The cost per call site: the same 200 functions (100 sync, 100 async) built four ways, each
#    crate alone with its dependencies already built: plain, with #[retry] (the sync ones with
#    `jitter = full`), with a retry_block! in each body, and with backon 1.6's call form. The CPU
#    time (user + sys) of `cargo build` after touching the crate, best of N rounds (3), the
#    crates taken in turn within each round so that a change of load hits them alike. Printed:
#    the cost over plain, per site, and as a ratio to backon's.
# 3. The marginal cold build: a crate that already builds tokio (rt, macros, time) and serde
#    (derive), with its dependencies built; then `retry-runtime` (default features) added, or
#    backon: the packages each adds and the CPU of the build that follows (best of N).
# 4. With --profile, where the per-site cost goes (rustc through RUSTC_BOOTSTRAP=1, as these
#    flags are nightly-only): -Ztime-passes with one codegen unit (so that each pass's wall time
#    is its CPU time), -Zself-profile summarised per query against the plain crate (with
#    measureme's analysis library from crates.io, built here), the LLVM IR that each site
#    instantiates before LLVM's passes (cargo llvm-lines: lines and copies) and after them
#    (--emit=llvm-ir: the always-inliner runs at opt-level 0 too), the runtime functions that
#    fill one site after inlining (bench/ir-inlined.py), and the same crates against a copy of
#    the runtime whose `#[inline(always)]` are `#[inline]`.
#
# Everything happens in a temporary directory with its own target directories; crates.io must
# be reachable (or the packages already in ~/.cargo). Wall time depends on what else the machine
# runs, so CPU time (user + sys) is the figure; the load average is printed before and after.
set -euo pipefail
# The whole script is one block, read before it runs: an edit to this file during a run (which
# takes several minutes) cannot change what the run does.
{
profile_flag=""
profile_name="debug"
profile_dir="debug"
deep=false
rounds=3
while [[ $# -gt 0 ]]; do
    case "$1" in
        --release) profile_flag="--release"; profile_name="release"; profile_dir="release" ;;
        --profile) deep=true ;;
        --rounds) rounds="$2"; shift ;;
        *) echo "usage: bash bench/compile-cost.sh [--release] [--profile] [--rounds N]" >&2; exit 2 ;;
    esac
    shift
done

workspace="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CARGO_INCREMENTAL=0
export CARGO_TERM_COLOR=never
# No lint output: rendering diagnostics is not the cost being measured.
export RUSTFLAGS="-A warnings"
unset CARGO_TARGET_DIR

load() { cut -d' ' -f1-3 /proc/loadavg; }

# Runs a command and prints "wall user+sys" in seconds.
measure() {
    local out
    out="$( { TIMEFORMAT='%R %U %S'; time "$@" >/dev/null 2>&1; } 2>&1 )"
    awk '{ printf "%.2f %.2f", $1, $2 + $3 }' <<<"$out"
}

# The packages of a crate's build (normal and build dependencies), one per line.
package_list() {
    (cd "$1" && cargo tree -e normal,build --prefix none 2>/dev/null \
        | sed -E 's/ \(\*\)$//; s/ \(proc-macro\)//' | sort -u)
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

runtime_dep="retry-runtime = { path = \"$workspace/retry-runtime\" }"
backon_dep='backon = "1.6.0"'

error_type='
#[derive(Debug)]
pub struct Busy;
impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'"'"'_>) -> std::fmt::Result { f.write_str("busy") }
}
impl std::error::Error for Busy {}
pub fn is_busy(_: &Busy) -> bool { true }
'

echo "# Compile cost ($profile_name; rustc $(rustc --version | cut -d' ' -f2), $(nproc) cores, $(date -u +%Y-%m-%d), $(git -C "$workspace" rev-parse --short HEAD))"
echo
echo "load average (1, 5, 15 min) before: $(load)"

# --- 1. one small crate, two ways --------------------------------------------------------------
small_retry="$(new_crate small-retry "$runtime_dep")"
cat >"$small_retry/src/lib.rs" <<RS
$error_type
use retry_runtime::retry;

#[retry(max = 3, base = "100ms", on = is_busy)]
pub fn check(x: u64) -> Result<u64, Busy> { if x == 0 { Err(Busy) } else { Ok(x) } }

#[retry(max = 3, base = "100ms", on = is_busy)]
pub async fn check_async(x: u64) -> Result<u64, Busy> { if x == 0 { Err(Busy) } else { Ok(x) } }
RS

small_backon="$(new_crate small-backon "$backon_dep")"
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

echo
echo "## 1. Clean $profile_name build of a small crate"
echo
echo "| crate | packages built | wall | CPU (user + sys) |"
echo "|---|---:|---:|---:|"
for dir in "$small_retry" "$small_backon"; do
    name="$(basename "$dir")"
    # Minus one: the crate itself.
    count=$(( $(package_list "$dir" | wc -l) - 1 ))
    (cd "$dir" && cargo clean -q)
    read -r wall cpu <<<"$(cd "$dir" && measure cargo build $profile_flag)"
    echo "| $name | $count | $wall s | $cpu s |"
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

# --- 2. 200 call sites, four ways --------------------------------------------------------------
# One target directory for the four crates: their dependencies are built once.
export CARGO_TARGET_DIR="$work/target-sites"
sites_plain="$(new_crate sites-plain "$runtime_dep")"
sites_retry="$(new_crate sites-retry "$runtime_dep")"
sites_block="$(new_crate sites-block "$runtime_dep")"
sites_backon="$(new_crate sites-backon "$backon_dep")"
# The body of every function, sync or async: fails for one input.
body() { echo "if x == $1 { Err(Busy) } else { Ok(x + $1) }"; }
{
    echo "$error_type"
    echo "use retry_runtime as _;"
    for i in $(seq 1 100); do
        echo "pub fn sync_$i(x: u64) -> Result<u64, Busy> { $(body "$i") }"
        echo "pub async fn async_$i(x: u64) -> Result<u64, Busy> { $(body "$i") }"
    done
} >"$sites_plain/src/lib.rs"
{
    echo "$error_type"
    echo "use retry_runtime::retry;"
    for i in $(seq 1 100); do
        echo "#[retry(max = 3, base = \"${i}ms\", jitter = full, on = is_busy)]"
        echo "pub fn sync_$i(x: u64) -> Result<u64, Busy> { $(body "$i") }"
        echo "#[retry(max = 3, base = \"${i}ms\", on = is_busy)]"
        echo "pub async fn async_$i(x: u64) -> Result<u64, Busy> { $(body "$i") }"
    done
} >"$sites_retry/src/lib.rs"
{
    echo "$error_type"
    echo "use retry_runtime::retry_block;"
    for i in $(seq 1 100); do
        echo "pub fn sync_$i(x: u64) -> Result<u64, Busy> {"
        echo "    retry_block!(max = 3, base = \"${i}ms\", jitter = full, on = is_busy => { $(body "$i") })"
        echo "}"
        echo "pub async fn async_$i(x: u64) -> Result<u64, Busy> {"
        echo "    retry_block!(max = 3, base = \"${i}ms\", on = is_busy => async { $(body "$i") }).await"
        echo "}"
    done
} >"$sites_block/src/lib.rs"
# backon's jitter is on for both (the attribute's default jitter is on too: `d + U[0, d/2)`).
{
    echo "$error_type"
    echo "use backon::{BlockingRetryable, ExponentialBuilder, Retryable};"
    echo "use std::time::Duration;"
    for i in $(seq 1 100); do
        policy="ExponentialBuilder::new().with_min_delay(Duration::from_millis($i)).with_max_times(3).with_jitter()"
        echo "pub fn sync_$i(x: u64) -> Result<u64, Busy> {"
        echo "    (|| $(body "$i")).retry($policy).when(is_busy).call()"
        echo "}"
        echo "pub async fn async_$i(x: u64) -> Result<u64, Busy> {"
        echo "    (|| async move { $(body "$i") }).retry($policy).when(is_busy).await"
        echo "}"
    done
} >"$sites_backon/src/lib.rs"

sites=("$sites_plain" "$sites_retry" "$sites_block" "$sites_backon")
for dir in "${sites[@]}"; do
    (cd "$dir" && cargo build -q $profile_flag)
done

# Best of N rounds of "touch, cargo build" per crate, the crates in turn within each round.
declare -A best all
for round in $(seq 1 "$rounds"); do
    for dir in "${sites[@]}"; do
        name="$(basename "$dir")"
        touch "$dir/src/lib.rs"
        read -r _ cpu <<<"$(cd "$dir" && measure cargo build $profile_flag)"
        all[$name]="${all[$name]:+${all[$name]}, }$cpu"
        if [[ -z "${best[$name]:-}" ]] || awk -v a="$cpu" -v b="${best[$name]}" 'BEGIN { exit !(a < b) }'; then
            best[$name]="$cpu"
        fi
    done
done

plain="${best[sites-plain]}"
backon_over="$(awk -v c="${best[sites-backon]}" -v p="$plain" 'BEGIN { print c - p }')"
label() {
    case "$1" in
        sites-plain) echo "200 plain functions" ;;
        sites-retry) echo "200 \`#[retry]\` functions" ;;
        sites-block) echo "200 \`retry_block!\`s" ;;
        sites-backon) echo "200 backon 1.6 call sites" ;;
    esac
}
echo
echo "## 2. 200 call sites (100 sync, 100 async), dependencies already built ($profile_name)"
echo
echo "CPU (user + sys) of \`cargo build\` after touching the crate, best of $rounds rounds (the rounds in parentheses)."
echo
echo "| crate | CPU, best | over plain | per site | ratio to backon's per-site cost |"
echo "|---|---:|---:|---:|---:|"
for dir in "${sites[@]}"; do
    name="$(basename "$dir")"
    awk -v c="${best[$name]}" -v p="$plain" -v b="$backon_over" -v l="$(label "$name")" -v r="${all[$name]}" -v n="$name" 'BEGIN {
        if (n == "sites-plain") { printf "| %s | %.2f s (%s) | | | |\n", l, c, r; exit }
        o = c - p
        printf "| %s | %.2f s (%s) | %.2f s | %.1f ms | %.2f× |\n", l, c, r, o, 1000 * o / 200, o / b
    }'
done

# --- 3. the marginal cold build ----------------------------------------------------------------
unset CARGO_TARGET_DIR
service="$(new_crate service 'tokio = { version = "1", features = ["rt", "macros", "time"] }
serde = { version = "1", features = ["derive"] }')"
cat >"$service/src/lib.rs" <<'RS'
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
pub struct Claim {
    pub id: u64,
}

pub async fn pause_then(claim: Claim) -> Claim {
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    claim
}

#[tokio::main(flavor = "current_thread")]
pub async fn run() -> Claim {
    pause_then(Claim { id: 1 }).await
}
RS
(cd "$service" && cargo generate-lockfile -q && cargo build -q $profile_flag)
cp -a "$service/Cargo.toml" "$service/Cargo.toml.base"
cp -a "$service/Cargo.lock" "$service/Cargo.lock.base"
package_list "$service" >"$work/service.packages"
base_cpu="$(cd "$service" && touch src/lib.rs && measure cargo build $profile_flag | cut -d' ' -f2)"
mv "$service/target" "$work/service-target"

echo
echo "## 3. The marginal cold build ($profile_name): a crate with tokio (rt, macros, time) and serde (derive), dependencies built"
echo
echo "The crate alone rebuilds in $base_cpu s of CPU. Adding one dependency (best of $rounds cold builds of what it adds):"
echo
echo "| added | packages added | CPU, best | wall of that build | the packages |"
echo "|---|---:|---:|---:|---|"
for added in "$runtime_dep" "$backon_dep"; do
    cp -a "$service/Cargo.toml.base" "$service/Cargo.toml"
    cp -a "$service/Cargo.lock.base" "$service/Cargo.lock"
    awk -v dep="$added" '{ print } /^\[dependencies\]$/ { print dep }' "$service/Cargo.toml.base" >"$service/Cargo.toml"
    # Resolve the addition (the lock keeps the versions already there), outside the measure.
    (cd "$service" && cargo fetch -q)
    package_list "$service" >"$work/service.after"
    new_packages="$(comm -13 "$work/service.packages" "$work/service.after")"
    best_cpu="" best_wall=""
    for _ in $(seq 1 "$rounds"); do
        rm -rf "$service/target"
        cp -a "$work/service-target" "$service/target"
        read -r wall cpu <<<"$(cd "$service" && measure cargo build $profile_flag)"
        if [[ -z "$best_cpu" ]] || awk -v a="$cpu" -v b="$best_cpu" 'BEGIN { exit !(a < b) }'; then
            best_cpu="$cpu" best_wall="$wall"
        fi
    done
    names="$(awk '{ print $1 }' <<<"$new_packages" | paste -sd, - | sed 's/,/, /g')"
    echo "| \`${added%% =*}\` | $(grep -c . <<<"$new_packages") | $best_cpu s | $best_wall s | $names |"
done
cp -a "$service/Cargo.toml.base" "$service/Cargo.toml"
cp -a "$service/Cargo.lock.base" "$service/Cargo.lock"
rm -rf "$service/target" "$work/service-target"

echo
echo "load average after: $(load)"

$deep || exit 0

# --- 4. where the per-site cost goes -----------------------------------------------------------
export CARGO_TARGET_DIR="$work/target-sites"
echo
echo "## 4. Where the per-site cost goes ($profile_name)"

# rustc's passes, one codegen unit: LLVM then runs on one thread, so each pass's wall time is
# its CPU time and the passes add up.
passes=(expand_crate type_check_crate MIR_borrow_checking monomorphization_collector_graph_walk
    generate_crate_metadata codegen_to_LLVM_IR LLVM_passes total)
for dir in "${sites[@]}"; do
    touch "$dir/src/lib.rs"
    (cd "$dir" && RUSTC_BOOTSTRAP=1 cargo rustc -q $profile_flag --lib -- -Ztime-passes -Ccodegen-units=1 \
        >"$work/$(basename "$dir").passes" 2>&1)
done
echo
echo "### rustc -Ztime-passes, -Ccodegen-units=1 (s; the last column: #[retry] over plain, per site)"
echo
echo "| pass | plain | \`#[retry]\` | \`retry_block!\` | backon | per \`#[retry]\` site | per backon site |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for pass in "${passes[@]}"; do
    row=()
    for dir in "${sites[@]}"; do
        row+=("$(awk -v p="$pass" '$NF == p { gsub(/;/, "", $2); print $2; exit }' "$work/$(basename "$dir").passes")")
    done
    awk -v p="$pass" -v a="${row[0]:-0}" -v b="${row[1]:-0}" -v c="${row[2]:-0}" -v d="${row[3]:-0}" 'BEGIN {
        printf "| `%s` | %.3f | %.3f | %.3f | %.3f | %.2f ms | %.2f ms |\n", p, a, b, c, d, 1000 * (b - a) / 200, 1000 * (d - a) / 200
    }'
done

# -Zself-profile, summarised with measureme's own analysis (analyzeme, crates.io): self time per
# query, each crate against the plain one.
summarize="$work/summarize"
mkdir -p "$summarize/src"
cat >"$summarize/Cargo.toml" <<'TOML'
[package]
name = "summarize-diff"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
analyzeme = "12.0.3"

[workspace]
TOML
cat >"$summarize/src/main.rs" <<'RS'
//! Self time per query or activity of a rustc `-Zself-profile` file, as measureme's
//! `summarize` computes it, and its difference from a baseline: `summarize-diff BASE OTHER ROWS`.
//! Times of activities on LLVM's threads are their threads' wall time.
use analyzeme::ProfilingData;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

fn load(path: &str) -> HashMap<String, (Duration, usize)> {
    let stem = Path::new(path).with_extension("");
    let data = match ProfilingData::new(&stem) {
        Ok(data) => data,
        Err(error) => {
            eprintln!("{path}: {error}");
            std::process::exit(1);
        }
    };
    let results = data.perform_analysis();
    results.query_data.into_iter().map(|q| (q.label, (q.self_time, q.invocation_count))).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (base, other) = (load(&args[0]), load(&args[1]));
    let rows: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(15);
    let get = |m: &HashMap<String, (Duration, usize)>, l: &str| m.get(l).copied().unwrap_or_default();
    // Activities that only wait for others, or contain them, would count their time twice.
    let umbrella = ["LLVM_passes", "finish_ongoing_codegen", "codegen_crate", "total"];
    let mut labels: Vec<&String> = base.keys().chain(other.keys()).filter(|l| !umbrella.contains(&l.as_str())).collect();
    labels.sort();
    labels.dedup();
    let mut table: Vec<(f64, &String)> =
        labels.iter().map(|l| (get(&other, l).0.as_secs_f64() - get(&base, l).0.as_secs_f64(), *l)).collect();
    table.sort_by(|x, y| y.0.total_cmp(&x.0));
    println!("| query or activity | self time, plain | self time, this crate | difference | calls, plain | calls, this crate |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (difference, label) in table.iter().take(rows) {
        let ((tb, cb), (to, co)) = (get(&base, label), get(&other, label));
        println!("| `{label}` | {:.3} s | {:.3} s | {difference:+.3} s | {cb} | {co} |", tb.as_secs_f64(), to.as_secs_f64());
    }
}
RS
(cd "$summarize" && CARGO_TARGET_DIR="$summarize/target" RUSTFLAGS="" cargo build -q --release)
for dir in "${sites[@]}"; do
    touch "$dir/src/lib.rs"
    mkdir -p "$work/self-profile/$(basename "$dir")"
    (cd "$dir" && RUSTC_BOOTSTRAP=1 cargo rustc -q $profile_flag --lib -- -Zself-profile="$work/self-profile/$(basename "$dir")" >/dev/null 2>&1)
done
for dir in "$sites_retry" "$sites_block" "$sites_backon"; do
    echo
    echo "### rustc -Zself-profile: $(label "$(basename "$dir")") against the plain crate (top 15 by difference; LLVM's activities in their threads' wall time)"
    echo
    "$summarize/target/release/summarize-diff" "$work"/self-profile/sites-plain/*.mm_profdata \
        "$work/self-profile/$(basename "$dir")"/*.mm_profdata 15
done

# The LLVM IR before LLVM's passes (cargo llvm-lines) and after them (--emit=llvm-ir).
if command -v cargo-llvm-lines >/dev/null; then
    llvm_lines=(cargo llvm-lines)
else
    (CARGO_TARGET_DIR="$work/tools-target" RUSTFLAGS="" cargo install -q --locked --root "$work/tools" cargo-llvm-lines)
    llvm_lines=("$work/tools/bin/cargo-llvm-lines" llvm-lines)
fi
# Instructions in the functions of a module, after LLVM's passes (allocas, calls, ...; not the
# labels or debug records).
instructions() {
    awk '/^define/ { f = 1; next } f && /^}/ { f = 0; next } f && /^  / && !/^ *#dbg/ { n++ } END { print n + 0 }' "$1"
}
emit_ir() {
    local dir="$1" crate
    crate="$(basename "$dir" | tr - _)"
    rm -f "$CARGO_TARGET_DIR/$profile_dir/deps/$crate"-*.ll
    touch "$dir/src/lib.rs"
    (cd "$dir" && cargo rustc -q $profile_flag --lib -- --emit=llvm-ir -Ccodegen-units=1 >/dev/null 2>&1)
    ls "$CARGO_TARGET_DIR/$profile_dir/deps/$crate"-*.ll
}
echo
echo "### LLVM IR per site, before LLVM's passes (cargo llvm-lines) and after them (instructions of --emit=llvm-ir, one codegen unit)"
echo
echo "| crate | IR lines before | copies (mono items) | instructions after | per site: lines before | copies | instructions after |"
echo "|---|---:|---:|---:|---:|---:|---:|"
declare -A before copies after
for dir in "${sites[@]}"; do
    name="$(basename "$dir")"
    touch "$dir/src/lib.rs"
    (cd "$dir" && "${llvm_lines[@]}" $profile_flag --lib >"$work/$name.llvm-lines" 2>/dev/null)
    read -r before[$name] copies[$name] <<<"$(awk '/\(TOTAL\)/ { print $1, $2; exit }' "$work/$name.llvm-lines")"
    after[$name]="$(instructions "$(emit_ir "$dir")")"
done
for dir in "${sites[@]}"; do
    name="$(basename "$dir")"
    awk -v l="$(label "$name")" -v b="${before[$name]}" -v c="${copies[$name]}" -v a="${after[$name]}" \
        -v pb="${before[sites-plain]}" -v pc="${copies[sites-plain]}" -v pa="${after[sites-plain]}" 'BEGIN {
        printf "| %s | %d | %d | %d | %.0f | %.1f | %.0f |\n", l, b, c, a, (b - pb) / 200, (c - pc) / 200, (a - pa) / 200
    }'
done
for dir in "$sites_retry" "$sites_block"; do
    echo
    echo "Largest instantiations before LLVM's passes, $(label "$(basename "$dir")") (cargo llvm-lines):"
    echo
    echo '```'
    sed -n '1,15p' "$work/$(basename "$dir").llvm-lines" | cut -c1-200
    echo '```'
done

# One sync and one async #[retry] site after LLVM's passes: where their instructions come from.
ir="$(emit_ir "$sites_retry")"
echo
echo "### One \`#[retry]\` site after LLVM's passes: the functions its instructions come from (bench/ir-inlined.py)"
for site in '^_ZN11sites_retry7sync_5017h' '^_ZN11sites_retry8async_5028_\$u7b\$\$u7b\$closure\$u7d\$\$u7d\$17h'; do
    echo
    echo '```'
    python3 "$workspace/bench/ir-inlined.py" "$ir" "$site" 16
    echo '```'
done

# The same sites against the runtime with `#[inline(always)]` read as `#[inline]`.
copy="$work/noinline"
mkdir -p "$copy"
git -C "$workspace" archive HEAD | tar -x -C "$copy"
grep -rl 'inline(always)' "$copy/retry-runtime/src" | xargs sed -i 's/#\[inline(always)\]/#[inline]/'
noinline_sites=()
for dir in "$sites_retry" "$sites_block"; do
    copy_dir="$(new_crate "noinline-$(basename "$dir")" "retry-runtime = { path = \"$copy/retry-runtime\" }")"
    cp "$dir/src/lib.rs" "$copy_dir/src/lib.rs"
    (cd "$copy_dir" && cargo build -q $profile_flag)
    noinline_sites+=("$copy_dir")
done
declare -A nbest
for round in $(seq 1 "$rounds"); do
    for dir in "${sites[@]}" "${noinline_sites[@]}"; do
        name="$(basename "$dir")"
        touch "$dir/src/lib.rs"
        read -r _ cpu <<<"$(cd "$dir" && measure cargo build $profile_flag)"
        if [[ -z "${nbest[$name]:-}" ]] || awk -v a="$cpu" -v b="${nbest[$name]}" 'BEGIN { exit !(a < b) }'; then
            nbest[$name]="$cpu"
        fi
    done
done
echo
echo "### The runtime's \`#[inline(always)]\` read as \`#[inline]\` (a copy of HEAD; best of $rounds, measured again beside the others)"
echo
echo "| crate | CPU, best | over plain | per site | ratio to backon's | instructions after LLVM's passes, per site |"
echo "|---|---:|---:|---:|---:|---:|"
nplain="${nbest[sites-plain]}"
nbackon="$(awk -v c="${nbest[sites-backon]}" -v p="$nplain" 'BEGIN { print c - p }')"
for name in sites-retry noinline-sites-retry sites-block noinline-sites-block sites-backon; do
    case "$name" in
        noinline-*) shown="$(label "${name#noinline-}"), \`#[inline]\`"; ir_after="$(instructions "$(emit_ir "$work/$name")")" ;;
        *) shown="$(label "$name")"; ir_after="${after[$name]}" ;;
    esac
    awk -v l="$shown" -v c="${nbest[$name]}" -v p="$nplain" -v b="$nbackon" -v a="$ir_after" -v pa="${after[sites-plain]}" 'BEGIN {
        o = c - p
        printf "| %s | %.2f s | %.2f s | %.1f ms | %.2f× | %.0f |\n", l, c, o, 1000 * o / 200, o / b, (a - pa) / 200
    }'
done
echo
echo "load average at the end: $(load)"
exit 0
}
