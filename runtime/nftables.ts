// The one nftables rule a host agent needs: VXLAN to its provider address is read by a packet capture,
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
  const rules = pas
    .map(
      (pa) =>
        `    ${pa.family === 4 ? 'ip' : 'ip6'} daddr ${pa.text} udp dport ${port} counter drop comment "slbx: VXLAN is read by the host agent's capture"`,
    )
    .join('\n');
  return nft(
    `table inet ${NFT_TABLE}\ndelete table inet ${NFT_TABLE}\ntable inet ${NFT_TABLE} {\n  chain input {\n    type filter hook input priority -10; policy accept;\n${rules}\n  }\n}\n`,
  );
}

export function removeVxlanDrop(): string | null {
  return nft(`table inet ${NFT_TABLE}\ndelete table inet ${NFT_TABLE}\n`);
}
