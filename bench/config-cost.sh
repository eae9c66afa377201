#!/usr/bin/env bash
# The compile cost of the configuration support (issue 42; bench/RESULTS.md §5, "The
# configuration support"): clean builds of
#   -p retry-runtime                    (default features)
#   -p retry-runtime --features serde   (the settings' Deserialize/Serialize)
#   -p retry-config                     (the registry, reload, TOML)
# in debug and release, each in a fresh target directory, the three taken in turn within each
# round so that a change of load hits them alike.
#
#   bash bench/config-cost.sh [ROUNDS]      # 3 by default; one TSV line per build on stdout
#
# Columns: round, package, profile, wall s, CPU s (user + sys), the package's rlib in bytes,
# the target directory's profile dir in bytes (du -sb), the load average before and after.
# Needs the packages in ~/.cargo (--offline). Wall time depends on what else the machine runs;
# CPU is the steadier figure.
set -euo pipefail
rounds=${1:-3}
workspace="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$workspace"
export CARGO_INCREMENTAL=0 CARGO_TERM_COLOR=never RUSTFLAGS="-A warnings"
unset CARGO_TARGET_DIR
load() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' '/'; }
echo -e "round\tpackage\tprofile\twall_s\tcpu_s\trlib_bytes\tdir_bytes\tload_before\tload_after"
for round in $(seq "$rounds"); do
    for profile in debug release; do
        for config in runtime runtime-serde config; do
            case $config in
                runtime) args=(-p retry-runtime); lib=libretry_runtime ;;
                runtime-serde) args=(-p retry-runtime --features serde); lib=libretry_runtime ;;
                config) args=(-p retry-config); lib=libretry_config ;;
            esac
            [[ $profile == release ]] && args+=(--release)
            dir="$work/$config-$profile-$round"
            before=$(load)
            times=$( { TIMEFORMAT='%R %U %S'; time CARGO_TARGET_DIR="$dir" cargo build --offline "${args[@]}" >/dev/null 2>&1; } 2>&1 )
            after=$(load)
            wall=$(awk '{ print $1 }' <<<"$times")
            cpu=$(awk '{ printf "%.2f", $2 + $3 }' <<<"$times")
            rlib=$(stat -c %s "$dir/$profile/deps/$lib"-*.rlib | head -1)
            size=$(du -sb "$dir/$profile" | cut -f1)
            echo -e "$round\t$config\t$profile\t$wall\t$cpu\t$rlib\t$size\t$before\t$after"
            rm -rf "$dir"
        done
    done
done
