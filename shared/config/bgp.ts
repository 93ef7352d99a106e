// The bgp section: the MUXes' speaker toward the router (docs/bgp.md).
import {
  checkKeys,
  boolField,
  has,
  intField,
  isList,
  isObj,
  itemObj,
  listItems,
  type Checker,
  type Claim,
  type Obj,
  type Path,
} from './check.js';
import { ipKey, reqAddressField } from './addresses.js';
import { CONFIG_DEFAULTS, CONFIG_LIMITS } from './defaults.js';
import type { NodeP } from './nodes.js';
import type { BgpBfdConfig, BgpConfig, BgpPeerConfig } from './types.js';

const BGP_KEYS = ['asn', 'holdTimeS', 'keepaliveS', 'reconnectMinMs', 'reconnectMaxMs', 'shutdownGraceMs', 'peers', 'bfd'] as const;
const BGP_PEER_KEYS = ['address', 'asn', 'port'] as const;
const BFD_KEYS = ['enabled', 'intervalMs', 'multiplier'] as const;

export /**
 * The optional `bgp` section (docs/bgp.md). Absent or null: no BGP. Returns undefined when invalid
 * (reported), null when absent.
 */
function validateBgp(
  c: Checker,
  raw: Obj,
  muxes: readonly (NodeP | undefined)[],
  taken: ReadonlyMap<string, Claim>,
  vipSeen: ReadonlyMap<string, number>,
): BgpConfig | null | undefined {
  if (!has(raw, 'bgp') || raw['bgp'] === null) return null;
  const v = raw['bgp'];
  if (!isObj(v)) {
    c.add(['bgp'], v, `must be a mapping with the fields ${BGP_KEYS.join(', ')}`);
    return undefined;
  }
  checkKeys(c, v, ['bgp'], BGP_KEYS);
  const D = CONFIG_DEFAULTS.bgp;
  const L = CONFIG_LIMITS;
  const at: Path = ['bgp'];
  const asnHint = ' (private ASNs: 64512..65534 or 4200000000..4294967294)';
  const asnCheck = (path: Path, asn: number | undefined): number | undefined => {
    // RFC 6793 9: AS_TRANS only stands in for 4-octet ASNs; RFC 7300: 65535 is reserved
    if (asn === 23456 || asn === 65535) {
      c.add(path, asn, `AS ${asn} is reserved (${asn === 23456 ? 'AS_TRANS, RFC 6793' : 'RFC 7300'}); use another AS${asnHint}`);
      return undefined;
    }
    return asn;
  };
  const asn = asnCheck([...at, 'asn'], intField(c, v, at, 'asn', L.asn, undefined, asnHint));
  let holdTimeS = intField(c, v, at, 'holdTimeS', L.holdTimeS, D.holdTimeS, ' (0: no hold timer and no keepalives; else at least 3)');
  if (holdTimeS === 1 || holdTimeS === 2) {
    c.add([...at, 'holdTimeS'], holdTimeS, 'must be 0 or at least 3 seconds (RFC 4271 4.2)');
    holdTimeS = undefined;
  }
  let keepaliveS: number | undefined;
  if (!has(v, 'keepaliveS')) keepaliveS = holdTimeS === undefined ? undefined : Math.max(1, Math.floor(holdTimeS / 3));
  else {
    keepaliveS = intField(c, v, at, 'keepaliveS', L.keepaliveS, undefined);
    if (keepaliveS !== undefined && holdTimeS !== undefined && holdTimeS > 0 && keepaliveS * 3 > holdTimeS) {
      c.add(
        [...at, 'keepaliveS'],
        keepaliveS,
        `must be at most a third of holdTimeS (${holdTimeS} s, RFC 4271 10), so that a lost keepalive does not end the session: at most ${Math.max(1, Math.floor(holdTimeS / 3))}`,
      );
      keepaliveS = undefined;
    }
  }
  const reconnectMinMs = intField(c, v, at, 'reconnectMinMs', L.reconnectMs, D.reconnectMinMs);
  let reconnectMaxMs = intField(c, v, at, 'reconnectMaxMs', L.reconnectMs, D.reconnectMaxMs);
  if (reconnectMinMs !== undefined && reconnectMaxMs !== undefined && reconnectMaxMs < reconnectMinMs) {
    c.add([...at, 'reconnectMaxMs'], reconnectMaxMs, `must be at least reconnectMinMs (${reconnectMinMs})`);
    reconnectMaxMs = undefined;
  }
  const shutdownGraceMs = intField(c, v, at, 'shutdownGraceMs', L.shutdownGraceMs, D.shutdownGraceMs);

  // peers
  const pAt: Path = [...at, 'peers'];
  let peers: BgpPeerConfig[] | undefined = [];
  if (!has(v, 'peers')) {
    c.add(pAt, undefined, 'required: a list of peers (the router: address and asn), at least one');
    peers = undefined;
  } else if (!isList(v['peers']) || (v['peers'] as unknown[]).length === 0) {
    c.add(pAt, v['peers'], 'must be a list of peers (the router: address and asn), at least one');
    peers = undefined;
  } else {
    const seen = new Map<string, number>();
    listItems(v['peers'] as unknown[]).forEach((it, i) => {
      const pat: Path = [...pAt, i];
      const o = itemObj(c, it, pat, BGP_PEER_KEYS);
      if (o === undefined) {
        peers = undefined;
        return;
      }
      const address = reqAddressField(c, o, pat, 'address', 'any');
      const pasn = asnCheck([...pat, 'asn'], intField(c, o, pat, 'asn', L.asn, undefined, asnHint));
      const port = intField(c, o, pat, 'port', L.port, D.peerPort);
      if (address !== undefined) {
        const prev = seen.get(ipKey(address));
        if (prev !== undefined) c.add([...pat, 'address'], o['address'], `peer ${address.text} is already bgp.peers[${prev}]`);
        else seen.set(ipKey(address), i);
        const t = taken.get(ipKey(address));
        if (t !== undefined)
          c.add([...pat, 'address'], o['address'], `${address.text} is ${t.what} (${t.path}); a peer is the router, an address of its own`);
        if (vipSeen.has(ipKey(address)))
          c.add([...pat, 'address'], o['address'], `${address.text} is a VIP; a peer is the router, an address of its own`);
        if (address.family === 6) {
          muxes.forEach((m, mi) => {
            if (m !== undefined && m.address6 === null) {
              c.add(
                [...pat, 'address'],
                o['address'],
                `an IPv6 peer needs every mux to have an IPv6 provider address, and mux ${m.name ?? mi} (muxes[${mi}]) has no address6`,
              );
            }
          });
        }
      }
      if (address === undefined || pasn === undefined || port === undefined) {
        peers = undefined;
        return;
      }
      peers?.push({ address, asn: pasn, port });
    });
  }

  // bfd
  let bfd: BgpBfdConfig | undefined;
  const bAt: Path = [...at, 'bfd'];
  if (!has(v, 'bfd') || v['bfd'] === null) bfd = { ...D.bfd };
  else if (!isObj(v['bfd'])) c.add(bAt, v['bfd'], `must be a mapping with the fields ${BFD_KEYS.join(', ')}`);
  else {
    const b = v['bfd'];
    checkKeys(c, b, bAt, BFD_KEYS);
    const enabled = boolField(c, b, bAt, 'enabled', D.bfd.enabled);
    const intervalMs = intField(c, b, bAt, 'intervalMs', L.bfdIntervalMs, D.bfd.intervalMs);
    const multiplier = intField(c, b, bAt, 'multiplier', L.bfdMultiplier, D.bfd.multiplier);
    if (enabled !== undefined && intervalMs !== undefined && multiplier !== undefined) bfd = { enabled, intervalMs, multiplier };
  }

  if (
    asn === undefined ||
    holdTimeS === undefined ||
    keepaliveS === undefined ||
    reconnectMinMs === undefined ||
    reconnectMaxMs === undefined ||
    shutdownGraceMs === undefined ||
    peers === undefined ||
    bfd === undefined
  )
    return undefined;
  return { asn, holdTimeS, keepaliveS, reconnectMinMs, reconnectMaxMs, shutdownGraceMs, peers, bfd };
}

// ---------------------------------------------------------------------------------------------
