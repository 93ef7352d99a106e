// Scenario 35 vlan-dips (issue 18, point 1; examples/lab-vlan.yaml): a pool of VLAN DIPs beside a pool
// of VXLAN DIPs on the same hosts. Verified from the client's records, the captures of the hosts' ports
// and of the router, and the host agent's counters; the tags are read by slbx's codecs and by tshark.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pkt } from '../../../shared/packet-builder.js';
import { buildPcap, LINKTYPE_ETHERNET } from '../../../shared/pcap-file.js';
import { formatMac } from '../../../shared/addr.js';
import { TCP_ACK } from '../../../shared/tcp.js';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, tsharkFields } from './check.js';
import { readClientRecords } from './north-south.js';

/** Frames the bad-tag pcap holds of each kind (all sent from the VLAN DIP's own MAC and address). */
export const BAD_TAG_COPIES = 7;
export const WRONG_VLAN = 200;

/**
 * gen-bad-tags --out DIR --config F --nic NAME --port-mac MAC: frames as the VM of NAME would send them
 * on its trunk (a reply of its pool's TCP service to a client), BAD_TAG_COPIES with VLAN WRONG_VLAN and
 * as many untagged; injected on the VM's eth0 (the trunk side of its VLAN relay).
 */
export function generateBadTags(argv: readonly string[]): void {
  const f = flagsOf(argv);
  const config = loadConfig(need(f, 'config'));
  const nic = config.nics.find((n) => n.name === need(f, 'nic'))!;
  const frame = (vlan: number | undefined, i: number) =>
    pkt()
      .eth({ src: formatMac(nic.mac), dst: need(f, 'port-mac'), ...(vlan !== undefined ? { vlan } : {}) })
      .ipv4({ src: nic.address4!.text, dst: '198.51.100.10' })
      .tcp({ sport: 80, dport: 47000 + i, flags: TCP_ACK })
      .build();
  const frames: Buffer[] = [];
  for (let i = 0; i < BAD_TAG_COPIES; i++) frames.push(frame(WRONG_VLAN, i), frame(undefined, i));
  writeFileSync(
    join(need(f, 'out'), 'bad-tags.pcap'),
    buildPcap(
      LINKTYPE_ETHERNET,
      frames.map((d, i) => ({ tsUs: 1e15 + i, data: d, origLen: d.length })),
    ),
  );
}

/**
 * vlan-dips --run RUNDIR --vxlan-json F --vlan-json F --requests N --port-macs host1:h1vl1=MAC,...
 *   --host-before F --host-after F (host1's counters around the bad-tag injection)
 */
export function verifyVlanDips(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const requests = Number(need(f, 'requests'));
  const netOf = new Map(config.networks.map((n) => [n.name, n]));
  const vlanNet = config.networks.find((n) => n.type === 'vlan')!;
  const vid = vlanNet.vlan!;
  const poolNet = new Map(config.pools.map((p) => [p.name, p.network]));
  const vipOf = (net: string) => config.vips.find((v) => v.address.family === 4 && v.rules.some((r) => poolNet.get(r.pool) === net))!;

  // 1. every request answered, by a backend of the right network
  for (const [key, vlan] of [
    ['vxlan-json', false],
    ['vlan-json', true],
  ] as const) {
    const recs = readClientRecords(need(f, key));
    const ok = recs.filter((r) => r.ok);
    const net = vlan ? vlanNet.name : config.networks.find((n) => n.type === 'vxlan')!.name;
    const nicNet = new Map(config.nics.map((n) => [n.name, n.network]));
    c.check(
      recs.length === requests && ok.length === requests,
      `all ${requests} requests to ${vipOf(net).address.text} (${net}) answered`,
      `${ok.length} ok of ${recs.length}`,
    );
    c.check(
      ok.length > 0 && ok.every((r) => r.backend !== null && nicNet.get(r.backend) === net),
      `every answer from ${vipOf(net).address.text} came from a backend of ${net}`,
      fmtCounts(countBy(ok, (r) => r.backend ?? '?')),
    );
  }

  // 2. the hosts' ports: toward a VLAN DIP every frame tagged with its VLAN, toward a VXLAN DIP none;
  // the VLAN DIPs' own frames tagged too. Our codecs, then tshark on the same files.
  const portMacs = new Map(
    need(f, 'port-macs')
      .split(',')
      .map((kv) => kv.split('=') as [string, string]),
  );
  for (const nic of config.nics) {
    const file = join(run, 'pcaps', `${nic.host}-${nic.port}.pcap`);
    const pm = portMacs.get(`${nic.host}:${nic.port}`)!;
    const vm = formatMac(nic.mac);
    const pkts = loadCapture(file);
    const toVm = pkts.filter((p) => p.d.first('eth')?.src === pm);
    const fromVm = pkts.filter((p) => p.d.first('eth')?.src === vm);
    const isVlan = netOf.get(nic.network)!.type === 'vlan';
    const want = isVlan ? vid : -1;
    const tagsTo = countBy(toVm, (p) => String(p.d.first('eth')?.vlan));
    const tagsFrom = countBy(fromVm, (p) => String(p.d.first('eth')?.vlan));
    const what = isVlan ? `tagged ${vid}` : 'untagged';
    // a backend answers about half of its pool's 1,000 requests; each is at least 4 frames each way
    c.check(
      toVm.length >= requests / 2 && toVm.every((p) => p.d.first('eth')?.vlan === want),
      `${nic.host} port ${nic.port} (${nic.network}): every frame toward ${nic.name} ${what}`,
      `${toVm.length} frames, by VLAN: ${fmtCounts(tagsTo)}`,
    );
    c.check(
      fromVm.length >= requests / 2 && fromVm.every((p) => p.d.first('eth')?.vlan === want),
      `${nic.host} port ${nic.port}: every frame from ${nic.name} ${what}`,
      `${fromVm.length} frames, by VLAN: ${fmtCounts(tagsFrom)}`,
    );
    // frame.number first: a row of an untagged frame is not empty
    const ts = tsharkFields(file, ['frame.number', 'vlan.id'], `eth.src == ${pm}`, []);
    if (ts !== null) {
      const tsTags = countBy(ts, (row) => (row[1] === '' || row[1] === undefined ? '-1' : row[1]));
      c.check(
        ts.length === toVm.length && (tsTags.get(String(want)) ?? 0) === toVm.length,
        `tshark: ${nic.port}'s frames toward ${nic.name} ${what}, as many as our decode`,
        `tshark ${ts.length}: ${fmtCounts(tsTags)}`,
      );
    }
  }

  // 3. DSR: the VLAN VIP's replies reach the router untagged, from the VIP
  const vip = vipOf(vlanNet.name).address.text;
  const router = loadCapture(join(run, 'pcaps', 'router-fab0.pcap'));
  const replies = router.filter((p) => p.d.first('ipv4')?.src === vip);
  c.check(
    replies.length >= requests && replies.every((p) => p.d.first('eth')?.vlan === -1),
    `DSR replies from ${vip} at the router are untagged`,
    `${replies.length} frames, by VLAN: ${fmtCounts(countBy(replies, (p) => String(p.d.first('eth')?.vlan)))}`,
  );
  const tsR = tsharkFields(join(run, 'pcaps', 'router-fab0.pcap'), ['frame.number', 'vlan.id'], `ip.src == ${vip}`, []);
  if (tsR !== null)
    c.check(
      tsR.length === replies.length && tsR.every((row) => (row[1] ?? '') === ''),
      `tshark: the same ${replies.length} replies from ${vip}, none with a VLAN tag`,
      `tshark ${tsR.length}`,
    );

  // 4. wrong and missing tags on the trunk: dropped and counted, exactly the injected ones
  const before = JSON.parse(readFileSync(need(f, 'host-before'), 'utf8')) as Record<string, number>;
  const after = JSON.parse(readFileSync(need(f, 'host-after'), 'utf8')) as Record<string, number>;
  const delta = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  c.check(
    delta('drop_out_vlan_wrong_tag') === BAD_TAG_COPIES,
    `host1 counted each frame tagged ${WRONG_VLAN} on the VLAN DIP's trunk as drop_out_vlan_wrong_tag`,
    `+${delta('drop_out_vlan_wrong_tag')}, ${BAD_TAG_COPIES} sent`,
  );
  c.check(
    delta('drop_out_vlan_missing_tag') === BAD_TAG_COPIES,
    `host1 counted each untagged frame on the trunk as drop_out_vlan_missing_tag`,
    `+${delta('drop_out_vlan_missing_tag')}, ${BAD_TAG_COPIES} sent`,
  );
  c.check(delta('out_dsr') === 0, 'none of them left by DSR', `out_dsr +${delta('out_dsr')}`);
  for (const k of Object.keys(after).filter((k) => k.startsWith('send_error')))
    if ((after[k] ?? 0) !== 0) c.check(false, `host1 ${k} is 0`, String(after[k]));
  return c;
}
