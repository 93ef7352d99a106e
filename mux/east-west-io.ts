// The MUX daemon's east-west I/O (docs/east-west.md): what the data plane in mux/east-west.ts needs from
// the process. The capture takes VXLAN from the hosts to the MUX's own provider address (only when the
// config has an internal VIP), an nftables rule keeps the namespace's kernel from answering it with ICMP
// port unreachable, and a redirect the data plane wrote (ctx.ew.out) leaves on the capture's handle
// as a whole Ethernet frame (to the MAC the MUX resolved for the host), counted when the kernel refuses it.
import type { SlbxConfig } from '../shared/config.js';
import { installUdpDrop, removeUdpDrop } from '../runtime/nftables.js';
import { redirectMacFor } from '../runtime/redirect-mac.js';
import type { FramePort } from '../runtime/frame-port.js';
import type { MuxContext } from './data-plane.js';

/** The MUX's nftables table (its own namespace; the host agent's is slbx_host_agent). */
export const MUX_NFT_TABLE = 'slbx_mux';

export function hasInternalVips(config: SlbxConfig): boolean {
  return config.vips.some((v) => v.scope === 'internal');
}

/** The capture filter's clause for VXLAN from the hosts to our provider address (IPv4 underlay), or null when no VIP is internal. */
export function muxEwCaptureClause(config: SlbxConfig, pa: string): string | null {
  if (!hasInternalVips(config)) return null;
  return `(udp dst port ${config.fabric.vxlanPort} and dst host ${pa})`;
}

/** Installs the drop of captured host VXLAN in our namespace's kernel; an error message or null. */
export function installMuxEwDrop(config: SlbxConfig, pa: { text: string; family: 4 | 6 }): string | null {
  return installUdpDrop(MUX_NFT_TABLE, [pa], [{ port: config.fabric.vxlanPort, what: "host VXLAN is read by the MUX's capture" }]);
}

export function removeMuxEwDrop(): string | null {
  return removeUdpDrop(MUX_NFT_TABLE);
}

/** The redirect HMAC of a policy key (the controller's API token), or null without one: no redirects are sent. */
export function muxRedirectMac(policyKey: string | null | undefined): MuxContext['ew']['mac'] {
  return policyKey == null || policyKey === '' ? null : redirectMacFor(policyKey);
}

/**
 * Sends the redirect the data plane left in ctx.ew.out (called when ctx.ew.outLen is not 0) and clears
 * it. A send the kernel refuses is counted as send_error_redirect.
 */
export function sendMuxRedirect(port: FramePort, ctx: MuxContext): void {
  const s = ctx.ew;
  const n = s.outLen;
  s.outLen = 0;
  const C = ctx.counters.index;
  if (!port.send(s.out, 0, n, true)) ctx.counters.values[C.send_error_redirect]!++;
  else if (!port.txDeferred) {
    ctx.counters.values[C.tx_packets]!++;
    ctx.counters.values[C.tx_bytes]! += n;
  }
}
