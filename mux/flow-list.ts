// The MUX's live flows as GET /flows lists them: both flow tables (IPv4 and IPv6), the trusted entries
// (a flow seen twice or more; the untrusted table of flows seen once is not listed). Allocates: for the
// status endpoint, never per packet.
import { formatIpv4, formatIpv6 } from '../shared/addr.js';
import type { MuxContext } from './data-plane.js';

export interface ListedFlow {
  /** Client address and port: `198.51.100.10:40000`, `[2001:db8:c::10]:40000`. */
  src: string;
  /** VIP and frontend port, written the same way. */
  dst: string;
  protocol: string;
  /** The backend (nic) the flow goes to. */
  nic: string;
  idleExpiresInS: number;
}

const protocolName = (p: number) => (p === 6 ? 'tcp' : p === 17 ? 'udp' : String(p));

/** At most `limit` flows, IPv4 first; a flow's key words are those of setKey4/setKey6 in data-plane.ts. */
export function listFlows(ctx: MuxContext, limit: number): ListedFlow[] {
  const out: ListedFlow[] = [];
  const now = ctx.nowS;
  const nic = (v: number) => ctx.tables.nicsById[v]?.name ?? `#${v}`;
  ctx.flows4.forEach(now, (k, v, e) => {
    if (out.length >= limit) return;
    out.push({
      src: `${formatIpv4(k[0]!)}:${k[3]! >>> 16}`,
      dst: `${formatIpv4(k[1]!)}:${k[3]! & 0xffff}`,
      protocol: protocolName(k[2]!),
      nic: nic(v),
      idleExpiresInS: e - now,
    });
  });
  ctx.flows6.forEach(now, (k, v, e) => {
    if (out.length >= limit) return;
    out.push({
      src: `[${formatIpv6(k, 0)}]:${k[9]! >>> 16}`,
      dst: `[${formatIpv6(k, 4)}]:${k[9]! & 0xffff}`,
      protocol: protocolName(k[8]!),
      nic: nic(v),
      idleExpiresInS: e - now,
    });
  });
  return out;
}
