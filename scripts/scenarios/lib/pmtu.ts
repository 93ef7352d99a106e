// Scenario 16: path MTU discovery through the VIP with a fabric MTU below the clients' and backends'.
// `gen-icmp` writes an ICMP error "from the router" about a VIP flow (it quotes the DSR reply
// VIP:80 -> client:port); `pmtu` verifies the run from the captures and counters.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pkt } from '../../../shared/packet-builder.js';
import { buildPcap, LINKTYPE_ETHERNET } from '../../../shared/pcap-file.js';
import { TCP_ACK } from '../../../shared/tcp.js';
import { Checks, flagsOf, loadCapture, loadConfig, need } from './check.js';

/** --out FILE --router-mac M --mux-mac M --router ADDR --vip ADDR --client ADDR --client-port N */
export function generateIcmp(argv: readonly string[]): void {
  const f = flagsOf(argv);
  const quoted = pkt()
    .ipv4({ src: need(f, 'vip'), dst: need(f, 'client'), ttl: 1 })
    .tcp({ sport: 80, dport: Number(need(f, 'client-port')), flags: TCP_ACK, seq: 1 })
    .payload(64)
    .build();
  const frame = pkt()
    .eth({ src: need(f, 'router-mac'), dst: need(f, 'mux-mac') })
    .ipv4({ src: need(f, 'router'), dst: need(f, 'vip') })
    .icmp({ type: 11, code: 0 })
    .payload(quoted)
    .build();
  writeFileSync(need(f, 'out'), buildPcap(LINKTYPE_ETHERNET, [{ tsUs: 1e15, data: frame, origLen: frame.length }]));
}

/**
 * --run RUNDIR --download-bytes N --download-result "SIZE CODE" --upload-bytes N --upload-result TEXT
 * --client-port N --slow-backend NIC --mux-before F --mux-after F
 */
export function verifyPmtu(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const mtu = config.fabric.mtu;
  const vip = config.vips[0]!.address.text;
  const inner = mtu - 50;
  const cap = (n: string) => loadCapture(join(run, 'pcaps', `${n}.pcap`));

  // the download: the backends' full-size replies met the host agents' ICMP and came down to the fabric MTU
  const [size, code] = need(f, 'download-result').split(' ');
  c.check(
    Number(size) === Number(need(f, 'download-bytes')) && code === '200',
    `a ${need(f, 'download-bytes')}-byte download through the VIP completed`,
    `${size} bytes, HTTP ${code}`,
  );
  let toBackends = 0;
  for (const n of config.nics) {
    for (const p of cap(n.name)) {
      const ic = p.d.first('icmp');
      const ip = p.d.first('ipv4');
      if (ic?.type === 3 && ic.code === 4 && ip?.dst === n.addresses[0]!.text) {
        if ((ic.rest & 0xffff) === mtu && ic.checksumOk === true && ip.src === config.networks[0]!.gateway?.text) toBackends++;
      }
    }
  }
  c.check(
    toBackends > 0,
    `host agents told the backend its replies were too big: ICMP fragmentation needed, MTU ${mtu}, from the gateway`,
    `${toBackends} seen at the backends`,
  );
  let dsr = 0;
  let dsrTooBig = 0;
  for (const h of config.hosts) {
    for (const p of cap(h.name)) {
      const ip = p.d.first('ipv4');
      if (ip?.src !== vip || p.d.first('vxlan') !== undefined) continue;
      dsr++;
      if (ip.totalLength > mtu) dsrTooBig++;
    }
  }
  c.check(dsr > 0 && dsrTooBig === 0, `every DSR reply fits the fabric MTU of ${mtu}`, `${dsr} replies, ${dsrTooBig} larger`);

  // the upload: the client's full-size packets met the MUX's ICMP and came down to what VXLAN leaves
  const up = need(f, 'upload-result').trim().split(' ');
  c.check(
    up[1] === need(f, 'upload-bytes'),
    `a ${need(f, 'upload-bytes')}-byte upload through the VIP completed`,
    `backend ${up[0]} received ${up[1]} bytes`,
  );
  const client = cap('client1');
  const fromVip = client.filter((p) => p.d.first('icmp')?.type === 3 && p.d.first('icmp')?.code === 4 && p.d.first('ipv4')?.src === vip);
  c.check(
    fromVip.length > 0 && fromVip.every((p) => (p.d.first('icmp')!.rest & 0xffff) === inner && p.d.first('icmp')!.checksumOk === true),
    `the client received ICMP fragmentation needed from the VIP with MTU ${inner} (${mtu} - 50 for VXLAN)`,
    `${fromVip.length} received`,
  );
  let vx = 0;
  let vxTooBig = 0;
  for (const m of config.muxes) {
    for (const p of cap(m.name)) {
      if (p.d.first('vxlan') === undefined) continue;
      vx++;
      if (p.d.first('ipv4')!.totalLength > mtu) vxTooBig++;
    }
  }
  c.check(vx > 0 && vxTooBig === 0, `every VXLAN packet fits the fabric MTU of ${mtu}`, `${vx} packets, ${vxTooBig} larger`);

  // an ICMP error about an existing flow reached that flow's backend, outer and quoted headers translated
  const port = Number(need(f, 'client-port'));
  const owner = need(f, 'slow-backend');
  let atOwner = 0;
  let elsewhere = 0;
  for (const n of config.nics) {
    const dip = n.addresses[0]!.text;
    for (const p of cap(n.name)) {
      const ic = p.d.first('icmp');
      if (ic?.type !== 11) continue;
      const ips = p.d.all('ipv4');
      const q = p.d.all('tcp')[0];
      const translated =
        ips[0]!.dst === dip &&
        ips[1]?.src === dip &&
        q?.srcPort === 80 &&
        q.dstPort === port &&
        ic.checksumOk === true &&
        ips[1]?.checksumOk === true;
      if (n.name === owner && translated) atOwner++;
      else elsewhere++;
    }
  }
  c.check(
    atOwner === 1 && elsewhere === 0,
    `an ICMP time-exceeded sent to the VIP about the flow of client port ${port} reached its backend ${owner}, translated to DIP:80`,
    `${atOwner} at ${owner}, ${elsewhere} elsewhere`,
  );
  const mb = JSON.parse(readFileSync(need(f, 'mux-before'), 'utf8'));
  const ma = JSON.parse(readFileSync(need(f, 'mux-after'), 'utf8'));
  c.note(
    `mux1's counters (the other MUXes took their share of flows): icmp_too_big_sent ${ma.icmp_too_big_sent - mb.icmp_too_big_sent >= 0 ? `+${ma.icmp_too_big_sent - mb.icmp_too_big_sent}` : ''}, icmp_errors_forwarded +${(ma.icmp_errors_forwarded ?? 0) - (mb.icmp_errors_forwarded ?? 0)}`,
  );
  return c;
}
