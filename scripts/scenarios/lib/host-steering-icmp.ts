// Scenario 43, part 3 (scripts/scenarios/43-host-steering.sh): the packets the host agent's worker steering
// keys by more than their own first header, on host agents with 2 workers: a backend's ICMP port
// unreachable about a client's UDP datagram (keyed by the datagram it quotes) and IPv6 replies with a
// destination options header before UDP (keyed by the ports behind it). Each must reach the worker that
// recorded its flow (the client's datagram, in by VXLAN): on another worker it finds no flow and is
// dropped as unsolicited (drop_out_dsr_unsolicited).
//
//   node dist/scripts/scenarios/lib/host-steering-icmp.js gen --config F --nics NAME=PORTMAC,... --backend-port P --udp6-json FILE --out-dir DIR
//     per nic, DIR/dstopts-NAME.pcap: for every flow of the client's UDP run (client.js udp --json FILE)
//     that nic NAME answered, a reply again, from the nic's eth0 to its port's MAC as the backend's stack
//     sends one ([DIP]:P -> client:port), with a destination options header (16 octets) before UDP
//   node dist/scripts/scenarios/lib/host-steering-icmp.js verify --capture FILE.pcap --icmp-json FILE --vip4 A --port4 P
//        --udp6-json FILE --vip6 A --port6 P --before F,F --after F,F
//     passes when (tshark decodes the client's capture): every flow of the ICMP run (client.js udp to
//     VIP4:PORT4, no backend listening) got an ICMP port unreachable from VIP4 whose quote is its datagram
//     as it sent it (client:port -> VIP4:PORT4), ICMP checksum good; every flow of the IPv6 run got its
//     injected reply from [VIP6]:PORT6 with the destination options header, UDP checksum good; and the
//     host agents' counters (summed, after - before) show icmp_errors_out equal to the ICMP flows and
//     no drop_out_dsr_unsolicited, drop_out_icmp_bad_quote or drop_internal_error.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatMac } from '../../../shared/addr.js';
import { pkt } from '../../../shared/packet-builder.js';
import { buildPcap, LINKTYPE_ETHERNET } from '../../../shared/pcap-file.js';
import { isMain } from '../../../runtime/command.js';
import { readClientRecordsOf } from '../../lab/client.js';
import { Checks, flagsOf, loadConfig, need, tsharkFields } from './check.js';

const USAGE =
  'usage: host-steering-icmp.js gen --config F --nics NAME=PORTMAC,... --backend-port P --udp6-json FILE --out-dir DIR\n' +
  '       host-steering-icmp.js verify --capture FILE.pcap --icmp-json FILE --vip4 A --port4 P --udp6-json FILE --vip6 A --port6 P --before F,F --after F,F\n';

/** The client's UDP flows (address:port) that got an answer, or all it sent (`answered` false), with the backend named. */
function flowsOf(file: string, answered: boolean): { key: string; addr: string; port: number; backend: string | null }[] {
  return readClientRecordsOf(file, 'udp')
    .filter((r) => r.sourceAddress !== null && r.sourcePort !== null && (!answered || r.ok))
    .map((r) => ({
      key: `${r.sourceAddress}:${r.sourcePort}`,
      addr: r.sourceAddress!,
      port: r.sourcePort!,
      backend: r.backend?.trim() || null,
    }));
}

function generate(argv: readonly string[]): void {
  const f = flagsOf(argv);
  const config = loadConfig(need(f, 'config'));
  const records = readClientRecordsOf(need(f, 'udp6-json'), 'udp');
  // the echo's source port: the rule's backend port (the echo answers from the port it was sent to)
  const sport = Number(need(f, 'backend-port'));
  for (const item of need(f, 'nics').split(',')) {
    const [name = '', portMac = ''] = item.split('=');
    const nic = config.nics.find((n) => n.name === name);
    if (nic === undefined) throw new Error(`nic ${name} is not in the config`);
    const dip6 = nic.address6?.text;
    if (dip6 === undefined) throw new Error(`nic ${nic.name} has no IPv6 address`);
    const frames: Buffer[] = [];
    records.forEach((r, i) => {
      if (!r.ok || r.backend?.trim() !== nic.name || r.sourceAddress === null || r.sourcePort === null) return;
      const e = pkt().eth({ src: formatMac(nic.mac), dst: portMac });
      frames.push(
        e
          .ipv6({ src: dip6, dst: r.sourceAddress })
          .ext6({ type: 'dest', len8: 1 })
          .udp({ sport, dport: r.sourcePort })
          .payload(`dstopts ${i}`)
          .build(),
      );
    });
    const out = join(need(f, 'out-dir'), `dstopts-${nic.name}.pcap`);
    writeFileSync(
      out,
      buildPcap(
        LINKTYPE_ETHERNET,
        frames.map((data, i) => ({ tsUs: i, data, origLen: data.length })),
      ),
    );
    process.stdout.write(`[sc43] ${frames.length} IPv6 replies with a destination options header from ${nic.name}\n`);
  }
}

/** tshark's decode with the UDP and IP checksums checked (off by default), one row of fields per packet. */
function tsharkChecked(path: string, filter: string, fields: string[]): string[][] | null {
  return tsharkFields(path, fields, filter, [], ['udp.check_checksum:TRUE', 'ip.check_checksum:TRUE']);
}

/**
 * A datagram or reply lost on a loaded machine (a ring full somewhere) is not what is judged: at most 1 in
 * 10 may be missing. A worker without the flow loses about half of them, and each shows in the exact check
 * of the counters (drop_out_dsr_unsolicited: 0).
 */
const LOSS = 'at most 1 in 10 missing';
function lossAllowed(n: number): number {
  return Math.floor(n / 10);
}

/** "n of n", or how many of the flows are missing, with a few of them. */
function missingOf(missing: { key: string }[], total: number): string {
  if (missing.length === 0) return `${total} of ${total}`;
  return `${missing.length} of ${total} without, e.g. ${missing
    .slice(0, 4)
    .map((x) => x.key)
    .join(', ')}`;
}

function sumCounters(files: string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const file of files)
    for (const [k, v] of Object.entries(JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>))
      if (typeof v === 'number') m.set(k, (m.get(k) ?? 0) + v);
  return m;
}

function verify(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const c = new Checks();
  const capture = need(f, 'capture');
  const vip4 = need(f, 'vip4');
  const port4 = need(f, 'port4');
  const vip6 = need(f, 'vip6');
  const port6 = need(f, 'port6');
  // 1. ICMP port unreachable about each datagram, translated (RFC 5508: from the VIP, the quote's destination the VIP:port)
  const icmpFlows = flowsOf(need(f, 'icmp-json'), false);
  let received4 = 0;
  c.check(icmpFlows.length > 0, 'the ICMP run sent datagrams', `${icmpFlows.length} flows`);
  const rows4 = tsharkChecked(capture, `icmp.type == 3 && icmp.code == 3`, [
    'ip.src',
    'ip.dst',
    'udp.srcport',
    'udp.dstport',
    'icmp.checksum.status',
  ]);
  if (rows4 !== null) {
    const got = new Map<string, number>();
    let bad = 0;
    for (const [src = '', dst = '', sport = '', dport = '', ck = ''] of rows4) {
      const [osrc, qsrc] = src.split(',');
      const [odst, qdst] = dst.split(',');
      if (osrc !== vip4 || qdst !== vip4 || dport !== port4 || qsrc !== odst || ck !== '1') {
        bad++;
        continue;
      }
      const k = `${qsrc}:${sport}`;
      got.set(k, (got.get(k) ?? 0) + 1);
    }
    const missing = icmpFlows.filter((x) => !got.has(x.key));
    received4 = icmpFlows.length - missing.length;
    c.check(
      missing.length <= lossAllowed(icmpFlows.length),
      `every datagram to ${vip4}:${port4} got an ICMP port unreachable from the VIP quoting it as sent (tshark; ${LOSS})`,
      missingOf(missing, icmpFlows.length),
    );
    c.check(bad === 0, 'no port unreachable at the client from elsewhere, quoting anything else, or with a bad checksum', `${bad}`);
  }
  // 2. the IPv6 replies with a destination options header, from the VIP
  // (an echo lost or late on a loaded machine only leaves its flow out: the replies judged are the answered flows')
  const v6Flows = flowsOf(need(f, 'udp6-json'), true);
  const v6Sent = flowsOf(need(f, 'udp6-json'), false).length;
  c.check(
    v6Flows.length >= (v6Sent * 3) / 4,
    'the IPv6 UDP echo run had most flows answered (3/4), to reply to again',
    `${v6Flows.length} of ${v6Sent}`,
  );
  const rows6 = tsharkChecked(capture, `ipv6.dstopts && udp`, [
    'ipv6.src',
    'ipv6.dst',
    'udp.srcport',
    'udp.dstport',
    'udp.checksum.status',
  ]);
  if (rows6 !== null) {
    const got = new Set<string>();
    let bad = 0;
    for (const [src = '', dst = '', sport = '', dport = '', ck = ''] of rows6) {
      if (src !== vip6 || sport !== port6 || ck !== '1') bad++;
      else got.add(`${dst}:${dport}`);
    }
    const missing = v6Flows.filter((x) => !got.has(x.key));
    c.check(
      missing.length <= lossAllowed(v6Flows.length),
      `every answered IPv6 flow got its reply with a destination options header from [${vip6}]:${port6} (tshark, UDP checksum good; ${LOSS})`,
      missingOf(missing, v6Flows.length),
    );
    c.check(bad === 0, 'no reply with a destination options header from elsewhere or with a bad checksum', `${bad}`);
  }
  // 3. the host agents' counters: every error translated, nothing dropped on a worker without the flow
  const before = sumCounters(need(f, 'before').split(','));
  const after = sumCounters(need(f, 'after').split(','));
  const d = (k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0);
  c.note(
    `host agents (sum): icmp_errors_out +${d('icmp_errors_out')}, out_dsr +${d('out_dsr')}, drop_out_dsr_unsolicited +${d('drop_out_dsr_unsolicited')}, ` +
      `drop_out_icmp_bad_quote +${d('drop_out_icmp_bad_quote')}, drop_internal_error +${d('drop_internal_error')}`,
  );
  c.check(
    d('icmp_errors_out') >= received4 && d('icmp_errors_out') <= icmpFlows.length,
    'the host agents translated one ICMP error per datagram (icmp_errors_out: at least those the client got, at most one per datagram)',
    `${d('icmp_errors_out')}; the client got ${received4} of ${icmpFlows.length}`,
  );
  c.check(
    d('drop_out_dsr_unsolicited') === 0 && d('drop_out_icmp_bad_quote') === 0 && d('drop_internal_error') === 0,
    'no packet dropped on a worker without its flow (drop_out_dsr_unsolicited, drop_out_icmp_bad_quote, drop_internal_error: 0)',
  );
  return c;
}

if (isMain(import.meta.url)) {
  const [cmd, ...rest] = process.argv.slice(2);
  try {
    if (cmd === 'gen') generate(rest);
    else if (cmd === 'verify') verify(rest).exit();
    else {
      process.stdout.write(USAGE);
      process.exit(cmd === '--help' || cmd === '-h' ? 0 : 2);
    }
  } catch (e) {
    process.stderr.write(`host-steering-icmp ${cmd}: ${(e as Error).message}\n`);
    process.exit(2);
  }
}
