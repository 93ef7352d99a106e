// Prints the demo's account of a verified north-south run (the --account JSON of the north-south
// verifier): which hop saw what, with counts, in the order a request travels.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export function printAccount(path: string, runDir: string): void {
  const a = JSON.parse(readFileSync(path, 'utf8'));
  const w = (s: string) => process.stdout.write(`${s}\n`);
  const row = (hop: string, what: string) => w(`  ${hop.padEnd(34)}${what}`);
  const total = (o: Record<string, number>) => Object.values(o).reduce((s, v) => s + v, 0);
  w('');
  w(`The path of ${a.requests} HTTP requests to ${a.vip}:${a.port}, one TCP connection each, as the captures show it:`);
  w('');
  row(`client1 (${a.client.address})`, `sent ${a.client.sent} packets to ${a.vip}:${a.port}`);
  const how = existsSync(join(runDir, 'bird.conf')) ? 'learned by BGP from the MUXes (BIRD, merge paths)' : 'static multipath route';
  row('  router', `ECMP over ${a.muxes.length} MUX${a.muxes.length > 1 ? 'es' : ''} (${how}, L4 hash)`);
  for (const m of a.muxes) {
    const by = Object.entries(m.vxlanByHost as Record<string, number>)
      .map(([h, n]) => `${h} ${n}`)
      .join(', ');
    row(`${m.name} (${m.pa})`, `received ${m.received}, sent ${total(m.vxlanByHost)} in VXLAN VNI ${a.vni} (to ${by || 'none'})`);
  }
  row('', "each the client's packet byte for byte inside; no reply crossed a MUX");
  for (const h of a.hosts)
    row(`${h.name} (${h.pa})`, `received ${h.vxlanIn} VXLAN packets, NAT ${a.vip}:${a.port} -> DIP:${a.backendPort}`);
  for (const n of a.nics)
    row(
      `  ${n.name} (${n.dip})`,
      `received ${n.received} packets to ${n.dip}:${a.backendPort}, sent ${n.replied} replies, answered ${n.requests} requests`,
    );
  for (const h of a.hosts) row(`${h.name} -> router (DSR)`, `${h.dsrOut} replies from ${a.vip}:${a.port}, straight to the router`);
  row('client1', `received ${a.client.received} replies from ${a.vip}:${a.port}; ${a.ok}/${a.requests} requests answered`);
  row('any MUX interface', `${a.repliesAtMux} reply packets (direct server return)`);
  row('tshark cross-check', `${a.tsharkVxlan} VXLAN packets decoded, all VNI ${a.vni}`);
  w('');
  w(`${a.checks.passed} checks passed, ${a.checks.failed} failed. Pcaps and logs: ${runDir}/`);
  w(`  e.g. tshark -r ${runDir}/pcaps/mux1.pcap -d udp.port==4789,vxlan | head`);
}
