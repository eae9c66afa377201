#!/usr/bin/env bash
# Prometheus for the tests (examples/tests/it/prometheus.rs): Debian's `prometheus` package. The
# test starts its own server as a child process (a free loopback port, a temp config and TSDB
# directory) and kills it on every path; this script only makes sure the binary is there, and that
# the package's own service is not left running.
#
#   .ci/prometheus.sh install   # apt-get install prometheus if the binary is missing (root)
#   .ci/prometheus.sh path      # print the binary's path, or fail saying how to get it
#
# The test looks for $RETRY_TEST_PROMETHEUS, then /usr/bin/prometheus, then `prometheus` on the
# PATH; with CI set, a missing binary fails it.
set -euo pipefail

find_bin() {
    if [[ -n "${RETRY_TEST_PROMETHEUS:-}" && -x "$RETRY_TEST_PROMETHEUS" ]]; then
        echo "$RETRY_TEST_PROMETHEUS"
    elif [[ -x /usr/bin/prometheus ]]; then
        echo /usr/bin/prometheus
    elif command -v prometheus >/dev/null 2>&1; then
        command -v prometheus
    fi
}

install() {
    if [[ -n "$(find_bin)" ]]; then
        return
    fi
    if [[ "$(id -u)" != 0 ]]; then
        echo "Prometheus is missing; install it (Debian: sudo apt-get install prometheus)" >&2
        exit 1
    fi
    echo "installing Debian's prometheus package" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    # The package's maintainer scripts would start its service (and the node exporter it
    # recommends): --no-install-recommends leaves the exporter out, and a policy-rc.d that
    # refuses every start keeps the service down while the package installs. Machines without
    # one get it only for this command.
    local policy=/usr/sbin/policy-rc.d made_policy=
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        made_policy=1
    fi
    local status=0
    apt-get install -y -qq --no-install-recommends prometheus >&2 || status=$?
    if [[ -n "$made_policy" ]]; then
        rm -f "$policy"
    fi
    if [[ "$status" != 0 ]]; then
        exit "$status"
    fi
    # Under systemd the unit may have started anyway: stop it, and keep it from starting at boot.
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
        systemctl stop prometheus >&2 || true
        systemctl disable prometheus >&2 || true
    fi
    "$(find_bin)" --version 2>&1 | head -n 1 >&2
}

case "${1:-}" in
    install) install ;;
    path)
        bin="$(find_bin)"
        if [[ -z "$bin" ]]; then
            echo "Prometheus is missing: run \`.ci/prometheus.sh install\` as root, or install Debian's prometheus package" >&2
            exit 1
        fi
        echo "$bin"
        ;;
    *)
        sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
        exit 2
        ;;
esac
