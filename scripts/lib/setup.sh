# Shared set-up for the slbx scripts (source it): installs what is missing, then builds. Safe to run
# any number of times; each step is skipped when already done.
#   slbx_setup            apt packages (as root), npm ci, TypeScript build
# Honours SLBX_SKIP_APT=1 (no apt even if something is missing: the caller knows better).

SLBX_ROOT=${SLBX_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# Debian packages the lab, the scenarios and the tests use
SLBX_APT_PACKAGES=(libpcap-dev tcpdump tshark iproute2 ethtool nftables bird2 iperf3 netsniff-ng procps curl prometheus etcd-server)
# the packet-walk report's browser test (headless chromium) and slbctl top's terminal test (tmux)
SLBX_APT_PACKAGES+=(chromium tmux)

slbx_log() { printf '[slbx] %s\n' "$*" >&2; }

slbx_missing_packages() {
  local p missing=()
  for p in "${SLBX_APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  printf '%s\n' "${missing[@]}"
}

slbx_install_packages() {
  local missing
  mapfile -t missing < <(slbx_missing_packages | sed '/^$/d')
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "${SLBX_SKIP_APT:-0}" = 1 ]; then
    slbx_log "missing Debian packages (SLBX_SKIP_APT=1, not installing): ${missing[*]}"
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    slbx_log "missing Debian packages: ${missing[*]}; run as root (or: apt-get install ${missing[*]})"
    return 1
  fi
  slbx_log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture: answer no, without a prompt
  echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections 2>/dev/null || true
  apt-get update -q >/dev/null || { slbx_log 'apt-get update failed'; return 1; }
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null || { slbx_log "apt-get install ${missing[*]} failed"; return 1; }
  # Debian starts a system-wide prometheus (root namespace, :9090) and etcd (127.0.0.1:2379) on install
  # where systemd runs; the lab and the tests run their own, so the services this install started stop
  local pkg svc
  for pkg in prometheus:prometheus etcd-server:etcd; do
    svc=${pkg#*:}
    [[ " ${missing[*]} " == *" ${pkg%%:*} "* ]] || continue
    command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null || continue
    systemctl disable --now "$svc" >/dev/null 2>&1 || slbx_log "could not stop the system $svc service (slbx does not need it)"
  done
}

slbx_npm_install() {
  cd "$SLBX_ROOT" || return 1
  # npm ci only when node_modules does not match the lock file
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ] \
     || [ ! -f node_modules/cap/build/Release/cap.node ] || [ ! -f node_modules/raw-socket/build/Release/raw.node ]; then
    slbx_log 'npm ci (builds the cap and raw-socket addons with node-gyp)'
    npm ci --no-audit --no-fund >/dev/null || { slbx_log 'npm ci failed'; return 1; }
  fi
}

slbx_build() {
  cd "$SLBX_ROOT" || return 1
  npx tsc -p tsconfig.json || { slbx_log 'TypeScript build failed'; return 1; }
  # the batched packet I/O (--io ring); without it the daemons fall back to libpcap, and scripts/test.sh
  # fails (slbx_ring_built): scenario 17 and the ring tests need it
  if [ ! -f native/build/Release/slbx_ring.node ] || [ native/slbx_ring.c -nt native/build/Release/slbx_ring.node ]; then
    mkdir -p runs
    npm run -s build:native >runs/build-native.log 2>&1 || slbx_log 'ring addon not built (log: runs/build-native.log): --io ring falls back to pcap'
  fi
}

# Succeeds when the ring addon is built and newer than its source; otherwise says why.
slbx_ring_built() {
  local addon=$SLBX_ROOT/native/build/Release/slbx_ring.node
  if [ ! -f "$addon" ] || [ "$SLBX_ROOT/native/slbx_ring.c" -nt "$addon" ]; then
    slbx_log "the ring addon is not built (npm run build:native; log: runs/build-native.log): the ring I/O path cannot be tested"
    return 1
  fi
}

slbx_setup() {
  slbx_install_packages && slbx_npm_install && slbx_build
}
