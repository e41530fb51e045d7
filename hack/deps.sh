#!/usr/bin/env bash
# Installs the system packages gpupack's tests start: Debian's prometheus
# (the real server and promtool), Debian's victoria-metrics (its single
# node, a store gpupack's queries are checked against), Debian's headless
# Chromium (the browser tests of gpupack serve), and a C compiler for the NVML reader's test,
# which builds with cgo (-tags nvml). Idempotent; needs root for apt-get.
set -euo pipefail
need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v victoria-metrics >/dev/null 2>&1 || need+=(victoria-metrics)
command -v chromium-headless-shell >/dev/null 2>&1 || need+=(chromium-headless-shell)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ ${#need[@]} -eq 0 ]; then
	echo "[deps] all present"
	exit 0
fi
echo "[deps] installing: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
# The packages would start system services on :9090 and :8428; tests run
# their own servers. Debian's policy-rc.d mechanism keeps the packages
# from starting them (exit 101: action forbidden); a policy the machine
# already has is kept.
ours=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	ours=1
fi
trap 'if [ -n "$ours" ]; then rm -f /usr/sbin/policy-rc.d; fi' EXIT
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}"
# Where a policy of the machine's own let the service start anyway, stop
# that one service through its manager (its PID file), never by name: a
# Prometheus the user runs is not ours to end.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
	systemctl stop prometheus || true
elif [ -s /run/prometheus/prometheus.pid ] && [ -x /etc/init.d/prometheus ]; then
	/etc/init.d/prometheus stop || true
fi
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet victoria-metrics 2>/dev/null; then
	systemctl stop victoria-metrics || true
fi
