#!/usr/bin/env bash
# Installs the system packages gpupack's tests start: Debian's prometheus
# (the real server and promtool). Idempotent; needs root for apt-get.
set -euo pipefail
need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
if [ ${#need[@]} -eq 0 ]; then
	echo "[deps] all present"
	exit 0
fi
echo "[deps] installing: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}"
# The package starts a system service on :9090; tests run their own server.
if command -v systemctl >/dev/null 2>&1; then systemctl stop prometheus 2>/dev/null || true; fi
pkill -x prometheus 2>/dev/null || true
