// The packet-walk report (scripts/lab/report.ts) opened in a real browser: headless Chromium loads the
// page built from a small demo run's captures (test/fixtures/packet-walk: `scripts/demo.sh --requests
// 20`, pcaps written by tcpdump from the kernel), and the test fails on a console error or exception, on
// any request other than the page itself (it must be self-contained), on a blank page (the screenshot
// nearly one colour), and unless the sequence diagram holds every hop of the walked flow: the addresses,
// ports, VXLAN outer header and VNI of each SYN and SYN-ACK of that flow in every capture, as tshark
// decodes them (not slbx's decoder, which the report itself uses).
import { describe, expect, it } from 'vitest';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildReport } from '../scripts/lab/report.js';
import { chromiumMissing, colourSpread, decodePng, visitPage } from './helpers/chromium.js';
import { unmet } from './helpers/prerequisite.js';

const FIXTURE = join(__dirname, 'fixtures', 'packet-walk');
const VIP = '203.0.113.10';

function tsharkMissing(): string | null {
  const r = spawnSync('tshark', ['--version'], { encoding: 'utf8' });
  return r.error === undefined ? null : 'tshark is not installed (apt-get install tshark)';
}

function tshark(pcap: string, filter: string, fields: string[]): string[][] {
  const args = ['-r', pcap, '-d', 'udp.port==4789,vxlan', '-Y', filter, '-T', 'fields', '-E', 'occurrence=a', '-E', 'aggregator=,'];
  for (const f of fields) args.push('-e', f);
  const r = spawnSync('tshark', args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`tshark ${args.join(' ')}: ${r.stderr}`);
  const t = r.stdout.replace(/\n+$/, '');
  return t === '' ? [] : t.split('\n').map((l) => l.split('\t'));
}

/** Every SYN and SYN-ACK of the run's first flow to the VIP, in every capture, as tshark decodes it. */
function hopsByTshark(dir: string): { capture: string; text: string[] }[] {
  const pcaps = join(dir, 'pcaps');
  const first = tshark(join(pcaps, 'client1.pcap'), `ip.dst == ${VIP} && tcp.dstport == 80 && tcp.flags.syn == 1 && tcp.flags.ack == 0`, [
    'ip.src',
    'tcp.srcport',
  ])[0];
  if (first === undefined) throw new Error('client1.pcap holds no SYN to the VIP');
  const [client, port] = first as [string, string];
  const out: { capture: string; text: string[] }[] = [];
  for (const f of readdirSync(pcaps).filter((n) => n.endsWith('.pcap'))) {
    const rows = tshark(join(pcaps, f), `ip.addr == ${client} && tcp.port == ${port} && tcp.flags.syn == 1`, [
      'ip.src',
      'ip.dst',
      'tcp.srcport',
      'tcp.dstport',
      'udp.srcport',
      'vxlan.vni',
    ]);
    for (const r of rows) {
      const ips = r[0]!.split(',').map((s, i) => [s, r[1]!.split(',')[i]!] as const);
      const inner = ips.at(-1)!;
      const text = [`${inner[0]}:${r[2]} -> ${inner[1]}:${r[3]}`];
      // VXLAN: the outer addresses, the outer UDP source port and the VNI too
      if (r[5] !== '') text.push(`outer ${ips[0]![0]}:${r[4]!.split(',')[0]} -> ${ips[0]![1]}:4789, VNI ${r[5]}`);
      out.push({ capture: f.replace(/\.pcap$/, ''), text });
    }
  }
  return out;
}

const missing = chromiumMissing() ?? tsharkMissing();

describe.skipIf(unmet(missing, 'the packet-walk report in headless Chromium'))('the packet-walk report in headless Chromium', () => {
  it('loads without errors or fetches, is not blank, and its diagram holds every hop tshark sees', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'slbx-report-'));
    try {
      cpSync(FIXTURE, dir, { recursive: true });
      const report = buildReport(dir, { vip: VIP, port: 80 });
      const page = join(dir, 'report.html');
      writeFileSync(page, report.html);
      const url = `file://${page}`;
      const visit = await visitPage(url, [
        `document.querySelector('svg#walk')?.textContent ?? ''`,
        `[...document.querySelectorAll('svg#walk g.lane')].map((g) => g.dataset.node)`,
        `document.querySelectorAll('svg#walk g.hop').length`,
        `document.body.innerText.length`,
      ]);
      const [svgText, lanes, arrows, textLen] = visit.values as [string, string[], number, number];

      expect(visit.errors, 'console errors, exceptions or failed loads').toEqual([]);
      expect(visit.requests, 'the page fetches nothing but itself').toEqual([url]);

      const px = decodePng(visit.png);
      const spread = colourSpread(px);
      // a blank (or nearly blank) page is one colour; the report is mostly white with text and charts
      expect(spread.dominantShare, `share of the most common colour in a ${px.width}x${px.height} screenshot`).toBeLessThan(0.97);
      expect(spread.colours).toBeGreaterThan(16);
      expect(textLen).toBeGreaterThan(500);

      const hops = hopsByTshark(dir);
      // client SYN, SYN at the MUX from the router, its VXLAN copy leaving the MUX and reaching the host,
      // SYN and SYN-ACK at the backend, the SYN-ACK leaving the host (DSR) and reaching the client
      expect(hops.length, JSON.stringify(hops)).toBe(8);
      for (const h of hops) {
        expect(lanes, `a lane for ${h.capture}`).toContain(h.capture);
        for (const t of h.text) expect(svgText, `the diagram holds ${t} (seen in ${h.capture}.pcap)`).toContain(t);
      }
      expect(arrows).toBe(7);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
