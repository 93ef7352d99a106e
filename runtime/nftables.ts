// The nftables rules of the daemons that read UDP with a capture (a host agent: VXLAN and Fastpath
// redirects; a MUX: VXLAN from the hosts). VXLAN to its provider address is read by a packet capture,
// so the namespace's kernel must not also answer it with ICMP port unreachable (it does, per datagram). Packet
// taps see a frame before netfilter's input hook drops it.
import { spawnSync } from 'node:child_process';

export const NFT_TABLE = 'slbx_host_agent';

function nft(script: string): string | null {
  const r = spawnSync('nft', ['-f', '-'], { input: script, encoding: 'utf8' });
  if (r.error) return `nft not runnable: ${r.error.message} (apt-get install nftables)`;
  if (r.status !== 0) return `nft failed: ${r.stderr.trim()}`;
  return null;
}

/** Installs (or replaces) the drop rule for each provider address; returns an error message or null. */
export function installVxlanDrop(pas: readonly { text: string; family: 4 | 6 }[], port: number): string | null {
  return installUdpDrop(NFT_TABLE, pas, [{ port, what: "VXLAN is read by the host agent's capture" }]);
}

export function removeVxlanDrop(): string | null {
  return removeUdpDrop(NFT_TABLE);
}

/** A UDP port a daemon reads with its capture, and what for (the rule's comment). */
export interface CapturedUdpPort {
  readonly port: number;
  readonly what: string;
}

/**
 * Installs (or replaces) table inet TABLE with one input drop rule per provider address and captured UDP
 * port (the host agent: VXLAN and Fastpath redirects; the MUX: VXLAN from the hosts); an error message or null.
 */
export function installUdpDrop(
  table: string,
  pas: readonly { text: string; family: 4 | 6 }[],
  ports: readonly CapturedUdpPort[],
): string | null {
  const rules = pas
    .flatMap((pa) =>
      ports.map((p) => `    ${pa.family === 4 ? 'ip' : 'ip6'} daddr ${pa.text} udp dport ${p.port} counter drop comment "slbx: ${p.what}"`),
    )
    .join('\n');
  return nft(
    `table inet ${table}\ndelete table inet ${table}\ntable inet ${table} {\n  chain input {\n    type filter hook input priority -10; policy accept;\n${rules}\n  }\n}\n`,
  );
}

export function removeUdpDrop(table: string): string | null {
  return nft(`table inet ${table}\ndelete table inet ${table}\n`);
}
