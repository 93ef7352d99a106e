// Interface discovery in the daemon's own namespace: which interface holds an address, its MAC, MTU.
import { networkInterfaces } from 'node:os';
import { readFileSync, existsSync } from 'node:fs';
import { parseMac } from '../shared/addr.js';

export interface NetInterface {
  name: string;
  mac: Uint8Array;
  mtu: number;
}

export function interfaceExists(name: string): boolean {
  return /^[^/\s]{1,15}$/.test(name) && existsSync(`/sys/class/net/${name}`);
}

/** MAC and MTU of an interface, or null when it does not exist. */
export function readInterface(name: string): NetInterface | null {
  if (!interfaceExists(name)) return null;
  try {
    const mac = parseMac(readFileSync(`/sys/class/net/${name}/address`, 'utf8').trim());
    const mtu = Number(readFileSync(`/sys/class/net/${name}/mtu`, 'utf8').trim());
    if (mac === null) return null;
    return { name, mac, mtu };
  } catch {
    return null;
  }
}

/** The interface that holds `address` (canonical text), or null. */
export function findInterfaceByAddress(address: string): NetInterface | null {
  for (const [name, addrs] of Object.entries(networkInterfaces())) {
    for (const a of addrs ?? []) {
      if (a.address.toLowerCase() === address.toLowerCase()) return readInterface(name);
    }
  }
  return null;
}

/** The IPv4 default gateway of this namespace (from /proc/net/route), or null. */
export function defaultGateway4(): string | null {
  try {
    for (const line of readFileSync('/proc/net/route', 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 3 || f[1] !== '00000000') continue;
      const g = parseInt(f[2]!, 16); // little-endian hex
      return `${g & 0xff}.${(g >>> 8) & 0xff}.${(g >>> 16) & 0xff}.${(g >>> 24) & 0xff}`;
    }
  } catch {
    /* no /proc */
  }
  return null;
}

/** The IPv6 default gateway (from /proc/net/ipv6_route), or null. */
export function defaultGateway6(): string | null {
  try {
    for (const line of readFileSync('/proc/net/ipv6_route', 'utf8').split('\n')) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[0] !== '00000000000000000000000000000000' || f[1] !== '00') continue;
      const g = f[4]!;
      if (/^0+$/.test(g)) continue;
      return g
        .match(/.{4}/g)!
        .map((h) => h.replace(/^0{1,3}/, ''))
        .join(':')
        .replace(/(^|:)0(:0)+(:|$)/, '::');
    }
  } catch {
    /* no /proc */
  }
  return null;
}
