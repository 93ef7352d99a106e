#!/bin/sh
# npm's install step of the slbx package (package.json "install"): builds the optional ring addon
# (native/, the daemons' --io ring) with node-gyp. It needs a compiler, python3, libpcap's headers
# (Debian: build-essential python3 libpcap-dev) and Node's headers. Without it the daemons fall back to
# libpcap (--io pcap, the default), so a failed build warns and the install goes on.
# In a git checkout it does nothing: there `npm run build:native` (scripts/test.sh) builds the addon.
[ -e .git ] && exit 0
if node-gyp rebuild --directory native >native/build.log 2>&1; then
  echo "slbx: ring addon built (native/build/Release/slbx_ring.node)"
else
  echo "slbx: the ring addon did not build (see native/build.log); --io ring falls back to pcap" >&2
fi
exit 0
