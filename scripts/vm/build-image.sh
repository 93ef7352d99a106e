#!/usr/bin/env bash
# Builds the VM lab's Debian root once and caches it (scripts/vm-lab.sh calls this; run it by hand to
# prebuild). Two stages, each cached under $SLBX_VM_CACHE (default /var/cache/slbx-vm, outside the repo):
#   base/          debootstrap --variant=minbase bookworm root with systemd, the Debian kernel and an
#                  initrd built with MODULES=list (virtio and ext4 are modules), BIRD, sshd, tcpdump;
#                  the host's Node 20 binary and npm copied in (Debian's nodejs is 18)
#   slbx-HASH.img  base + the slbx package installed by `npm install -g slbx-*.tgz` in a chroot of that
#                  root (the way a user installs it; the native addons build there) + the lab's guest
#                  units (scripts/vm/guest/), as an ext4 image made with `mkfs.ext4 -d` (no loop mount).
#                  HASH: sha256 of the tarball and the guest units (12 hex digits).
#   usage: scripts/vm/build-image.sh [--base-only] [--tarball FILE]
# Prints the image's path last. Needs root, debootstrap, the configured Debian mirror, the npm registry.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${SLBX_VM_CACHE:-/var/cache/slbx-vm}
base=$cache/base
base_only=0 tarball=''
while [ $# -gt 0 ]; do
  case "$1" in
    --base-only) base_only=1 ;;
    --tarball) tarball=${2:?--tarball FILE}; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "build-image.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
mkdir -p "$cache"
log() { printf '[vm-image] %s\n' "$*" >&2; }

# chroot_run DIR CMD: runs CMD in DIR with /proc, /sys, /dev bound, and unmounts them again (mkfs.ext4 -d
# must not copy the bind mounts)
chroot_run() {
  local root=$1 rc=0
  shift
  mount -t proc proc "$root/proc"
  mount -t sysfs sys "$root/sys"
  mount --bind /dev "$root/dev"
  mount --bind /dev/pts "$root/dev/pts"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive npm_config_nodedir=/usr ${NODE_EXTRA_CA_CERTS:+NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS} \
    /bin/sh -c "$*" || rc=$?
  umount "$root/dev/pts" "$root/dev" "$root/sys" "$root/proc"
  return $rc
}

if [ ! -f "$cache/base.ok" ]; then
  rm -rf "$base"
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  log "debootstrap minbase bookworm from $mirror into $base (a few minutes; log: $cache/debootstrap.log)"
  debootstrap --variant=minbase --include=systemd,systemd-sysv,udev,kmod,dbus \
    bookworm "$base" "$mirror" >"$cache/debootstrap.log" 2>&1 || { log "debootstrap failed (see $cache/debootstrap.log)"; exit 2; }
  # the initrd: only the modules the VM needs to mount its root (virtio disk, ext4), about 6 MB
  mkdir -p "$base/etc/initramfs-tools/conf.d"
  echo 'MODULES=list' >"$base/etc/initramfs-tools/conf.d/slbx-vm.conf"
  printf '%s\n' virtio_pci virtio_blk virtio_net ext4 crc32c_generic >>"$base/etc/initramfs-tools/modules"
  log "kernel, BIRD, sshd and the package's build needs (log: $cache/base-apt.log)"
  chroot_run "$base" 'apt-get update -q && apt-get install -y -q --no-install-recommends linux-image-amd64 initramfs-tools \
      iproute2 iputils-ping procps psmisc bird2 openssh-server tcpdump ethtool ca-certificates libpcap0.8 nftables curl \
      build-essential python3 libpcap-dev && apt-get clean' >"$cache/base-apt.log" 2>&1 || { log "apt failed (see $cache/base-apt.log)"; exit 2; }
  # Node: the host's Node 20 binary and npm
  cp -a "$(readlink -f "$(command -v node)")" "$base/usr/bin/node"
  mkdir -p "$base/usr/lib/node_modules" "$base/usr/include"
  cp -a /usr/lib/node_modules/npm "$base/usr/lib/node_modules/"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$base/usr/bin/npm"
  cp -a /usr/include/node "$base/usr/include/"
  for f in /etc/npmrc /usr/etc/npmrc; do if [ -f "$f" ]; then mkdir -p "$base$(dirname "$f")"; cp "$f" "$base$f"; fi; done
  # boot: serial console, root login by the lab's key only, no getty on tty1, faster boot
  echo 'slbx-vm' >"$base/etc/hostname"
  echo '/dev/vda / ext4 defaults,noatime 0 1' >"$base/etc/fstab"
  sed -i 's/^#\?PermitRootLogin.*/PermitRootLogin prohibit-password/; s/^#\?UseDNS.*/UseDNS no/' "$base/etc/ssh/sshd_config"
  for u in e2scrub_reap.service getty-static.service getty@tty1.service apt-daily.timer apt-daily-upgrade.timer systemd-timesyncd.service; do
    ln -sf /dev/null "$base/etc/systemd/system/$u"
  done
  rm -f "$base/etc/systemd/system/multi-user.target.wants/bird.service" # enabled per VM (the router only)
  [ -f "$cache/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$cache/id_ed25519"
  mkdir -p "$base/root/.ssh" && chmod 700 "$base/root/.ssh"
  cp "$cache/id_ed25519.pub" "$base/root/.ssh/authorized_keys"
  # the network: systemd-networkd, each VM's files written into its overlay at up
  ln -sf /lib/systemd/system/systemd-networkd.service "$base/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
  printf 'net.ipv4.ip_forward=1\nnet.ipv6.conf.all.forwarding=1\n' >"$base/etc/sysctl.d/60-slbx-vm-lab.conf"
  cp "$base"/boot/vmlinuz-* "$cache/vmlinuz"
  cp "$base"/boot/initrd.img-* "$cache/initrd.img"
  touch "$cache/base.ok"
  log "base done: $(du -sh "$base" | cut -f1), initrd $(du -h "$cache/initrd.img" | cut -f1)"
fi
[ "$base_only" = 1 ] && exit 0

if [ -z "$tarball" ]; then
  log "npm pack (the package: prepack builds dist/)"
  tarball=$(cd "$repo" && npm pack --silent --pack-destination "$cache" | tail -1)
  tarball=$cache/$tarball
fi
# the image's name: the tarball's and the lab's guest units' digest
hash=$(cat "$tarball" "$here"/guest/* | sha256sum | cut -c1-12)
img=$cache/slbx-$hash.img
if [ ! -f "$img" ]; then
  work=$cache/root-$hash
  rm -rf "$work"
  log "copying base, npm install -g $(basename "$tarball") in a chroot (log: $cache/install-$hash.log)"
  cp -a "$base" "$work"
  cp "$tarball" "$work/root/slbx.tgz"
  # the registry through this machine's CA bundle (it may hold a proxy's CA that Debian's lacks)
  cp /etc/ssl/certs/ca-certificates.crt "$work/root/host-ca.crt"
  chroot_run "$work" 'npm_config_cafile=/root/host-ca.crt npm install -g --no-fund --no-audit /root/slbx.tgz && slbx-mux --help >/dev/null && rm /root/slbx.tgz /root/host-ca.crt' \
    >"$cache/install-$hash.log" 2>&1 || { log "install failed (see $cache/install-$hash.log)"; exit 2; }
  # the units, the way docs/deploy.md installs them (enabled per VM by scripts/vm/lib.sh, vm_install)
  cp "$work/usr/lib/node_modules/slbx/packaging/systemd/"*.service "$work/etc/systemd/system/"
  # the lab's own units (not part of the package): the seed disk applied at boot, the backends
  cp "$here"/guest/*.service "$work/etc/systemd/system/"
  mkdir -p "$work/etc/systemd/system/sysinit.target.wants"
  ln -sf ../slbx-vm-seed.service "$work/etc/systemd/system/sysinit.target.wants/slbx-vm-seed.service"
  log "mkfs.ext4 -d (2 GiB sparse image)"
  rm -f "$img.tmp"
  mkfs.ext4 -q -F -L slbx-vm -d "$work" "$img.tmp" 2G >/dev/null
  mv "$img.tmp" "$img"
  rm -rf "$work"
fi
echo "$img"
