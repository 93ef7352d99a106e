// Verifies scenario 22 (VIPs created and deleted through the controller's API, under traffic):
//   * a VIP outside vipRanges is refused by the API (slbctl exits 1 and names the ranges) and changes
//     nothing (the generation stays);
//   * for each new VIP: no answer before the API call (the client's SYNs to it got no SYN-ACK), answers
//     after it, from the pool's backends; the router's route to it over every MUX appeared, and after
//     the delete disappeared; SYNs sent once the route was gone got no answer;
//   * the traffic to the existing VIPs ran across every change with zero failures.
// The times (API call -> route at the router, -> first answer; delete -> route withdrawn, -> last
// answer) are measured and printed, not asserted: speed is for benchmarks.
// Usage: verify.js vip-api --run RUNDIR --vips A,B --refused N [--existing F,F --existing-status S,S]
// RUNDIR holds config.yaml, pcaps/client1.pcap (TCP port 80 to and from the new VIPs), times.txt
// ("INDEX VIP ADD_US ADDED_US DEL_US DELETED_US" per VIP; "traffic START_US END_US"; "refused I STATUS
// GEN_BEFORE GEN_AFTER" per refused VIP), routes-INDEX.txt (the router's next hops, polled: bgp.sh),
// poll-INDEX.json (the lab client's records of the VIP's poller) and refused-I.txt (slbctl's output).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseIpAddr } from '../../../shared/addr.js';
import { readPolls } from './bgp.js';
import { readClientJson, readClientRecordsOf } from '../../lab/client.js';
import { Checks, flagsOf, loadCapture, loadConfig, need, tsharkFields, type CapturedPacket } from './check.js';

const SYN = 0x02;
const ACK = 0x10;

interface Phase {
  index: number;
  vip: string;
  addUs: number;
  addedUs: number;
  delUs: number;
  deletedUs: number;
}
interface Segment {
  us: number;
  clientPort: number;
  seq: number;
  ack: number;
  synAck: boolean;
}

function segmentsOf(packets: readonly CapturedPacket[], vip: string): Segment[] {
  const out: Segment[] = [];
  for (const p of packets) {
    const ip = p.d.layers.find((l) => l.layer === 'ipv4' || l.layer === 'ipv6') as { src: string; dst: string } | undefined;
    const tcp = p.d.first('tcp');
    if (ip === undefined || tcp === undefined || (tcp.flags & SYN) === 0) continue;
    if (ip.dst === vip && (tcp.flags & ACK) === 0)
      out.push({ us: p.tsUs, clientPort: tcp.srcPort, seq: tcp.seq, ack: tcp.ack, synAck: false });
    else if (ip.src === vip && (tcp.flags & ACK) !== 0)
      out.push({ us: p.tsUs, clientPort: tcp.dstPort, seq: tcp.seq, ack: tcp.ack, synAck: true });
  }
  return out;
}

const ms = (us: number) => `${(us / 1000).toFixed(1)} ms`;

export function verifyVipApi(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const lines = readFileSync(join(run, 'times.txt'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => l.split(' '));
  const phases: Phase[] = lines
    .filter((l) => l[0] === 'vip')
    .map((l) => ({
      index: Number(l[1]),
      vip: parseIpAddr(l[2]!)!.text,
      addUs: Number(l[3]),
      addedUs: Number(l[4]),
      delUs: Number(l[5]),
      deletedUs: Number(l[6]),
    }));
  const wanted = need(f, 'vips')
    .split(',')
    .map((v) => parseIpAddr(v)!.text);
  c.check(
    phases.length === wanted.length && phases.every((p, i) => p.vip === wanted[i] && p.addUs > 0 && p.delUs > p.addedUs),
    `every new VIP went through create and delete (${wanted.join(', ')})`,
    `${phases.length} phases recorded`,
  );

  // ---- refused: a VIP outside the ranges
  const ranges = config.vipRanges.map((r) => r.text).join(', ');
  const refused = lines.filter((l) => l[0] === 'refused');
  c.check(
    refused.length === Number(need(f, 'refused')),
    `the API was asked for ${need(f, 'refused')} VIPs outside vipRanges (${ranges})`,
    `${refused.length} asked`,
  );
  for (const [, i, status, before, after] of refused) {
    const text = readFileSync(join(run, `refused-${i}.txt`), 'utf8');
    const vip = /vip add (\S+)/.exec(text)?.[1] ?? '?';
    const says = text.includes(`is outside vipRanges (${ranges})`) && /add a prefix that holds it to vipRanges/.test(text);
    c.check(
      status !== '0' && says,
      `slbctl vip add ${vip} is refused (exit ${status}), the message names the ranges and the fix`,
      text.split('\n').find((l) => l.includes('outside')) ?? text.trim().slice(0, 200),
    );
    c.check(
      before === after && before !== undefined && before !== '',
      `the refused request changed nothing: generation ${before} before and ${after} after`,
    );
  }

  // ---- the new VIPs, from the client's capture
  const packets = loadCapture(join(run, 'pcaps', 'client1.pcap'));
  const muxPas = (fam: 4 | 6) =>
    config.muxes
      .map((m) => (fam === 4 ? m.address.text : (m.address6?.text ?? '')))
      .filter((a) => a !== '')
      .sort();
  let synAcksTotal = 0;
  for (const p of phases) {
    const fam = p.vip.includes(':') ? 6 : 4;
    const segs = segmentsOf(packets, p.vip);
    const syns = segs.filter((s) => !s.synAck);
    const answers = segs.filter((s) => s.synAck);
    synAcksTotal += answers.length;
    const answered = new Set(answers.map((s) => `${s.clientPort}|${(s.ack - 1) >>> 0}`));
    const synsBefore = syns.filter((s) => s.us < p.addUs);
    c.check(
      synsBefore.length >= 5 && answers.every((s) => s.us >= p.addUs),
      `${p.vip}: before the API call the client's SYNs got no answer`,
      `${synsBefore.length} SYNs before it, ${answers.filter((s) => s.us < p.addUs).length} SYN-ACKs`,
    );
    const first = answers.find((s) => s.us >= p.addUs);
    c.check(
      first !== undefined,
      `${p.vip}: the new VIP answered after slbctl vip add --wait`,
      first === undefined ? 'no SYN-ACK' : `${answers.length} SYN-ACKs from ${p.vip}:80`,
    );
    const polls = readPolls(join(run, `routes-${p.index}.txt`));
    const routed = polls.find((x) => x.us >= p.addUs && x.hops.length > 0);
    const full = polls.find((x) => x.us >= p.addUs && x.us < p.delUs && x.hops.slice().sort().join(',') === muxPas(fam).join(','));
    c.check(
      polls.filter((x) => x.us < p.addUs).every((x) => x.hops.length === 0) && full !== undefined,
      `${p.vip}: the router had no route before the call, then one over every MUX (${muxPas(fam).join(', ')})`,
      `${polls.length} polls of the router's kernel route`,
    );
    const gone = polls.find((x) => x.us >= p.delUs && x.hops.length === 0);
    const afterGone = gone === undefined ? [] : polls.filter((x) => x.us >= gone.us);
    c.check(
      gone !== undefined && afterGone.every((x) => x.hops.length === 0),
      `${p.vip}: after slbctl vip del the router's route was withdrawn and stayed so`,
      gone === undefined ? 'still routed at the last poll' : `${afterGone.length} polls without a route`,
    );
    const resolution = polls.length > 1 ? (polls[polls.length - 1]!.us - polls[0]!.us) / (polls.length - 1) : NaN;
    const lastAnswer = [...answers].reverse().find(() => true);
    const lateSyns = gone === undefined ? [] : syns.filter((s) => s.us > gone.us);
    const lateAnswered = lateSyns.filter((s) => answered.has(`${s.clientPort}|${s.seq}`));
    c.check(
      lateSyns.length >= 5 && lateAnswered.length === 0,
      `${p.vip}: SYNs sent once the route was gone got no answer`,
      `${lateSyns.length} SYNs after the withdrawal, ${lateAnswered.length} answered`,
    );
    const pollFile = join(run, `poll-${p.index}.json`);
    const recs = existsSync(pollFile) ? readClientRecordsOf(pollFile, 'http') : [];
    const ok = recs.filter((r) => r.ok);
    const pool = new Set(config.pools.find((x) => x.name === 'web')?.backends.map((b) => b.nic) ?? []);
    c.check(
      ok.length > 0 && ok.every((r) => r.backend !== null && pool.has(r.backend)),
      `${p.vip}: the poller's answers came from the backends of pool web`,
      `${ok.length} of ${recs.length} polls answered, by ${[...new Set(ok.map((r) => r.backend))].sort().join(', ')}`,
    );
    // measured, not asserted. t0: when the controller took the request (its generation's createdAt, GET
    // /v1/generations; the same clock as the captures and polls); slbctl's own start-up comes before it
    const applied = (file: string) => {
      const j = existsSync(join(run, file))
        ? (JSON.parse(readFileSync(join(run, file), 'utf8')) as {
            applied?: { createdAt?: string | null; lastAckMs?: number | null; complete?: boolean };
          })
        : {};
      return {
        atUs: j.applied?.createdAt ? Date.parse(j.applied.createdAt) * 1000 : NaN,
        lastAckMs: j.applied?.lastAckMs ?? null,
        complete: j.applied?.complete === true,
      };
    };
    const add = applied(`add-${p.index}.json`);
    const del = applied(`del-${p.index}.json`);
    c.check(
      add.complete &&
        del.complete &&
        Number.isFinite(add.atUs) &&
        Number.isFinite(del.atUs) &&
        add.atUs >= p.addUs - 1000 &&
        del.atUs >= p.delUs - 1000,
      `${p.vip}: slbctl --wait reported both changes applied by every agent`,
      `create applied ${add.lastAckMs} ms, delete ${del.lastAckMs} ms after the controller took them`,
    );
    const since = (us: number | undefined, t0: number) => (us === undefined ? 'never' : ms(us - t0));
    c.note(
      `${p.vip} created: every agent applied it ${add.lastAckMs} ms after the controller took the request; the router routed it ${since(routed?.us, add.atUs)} after (over every MUX: ${since(full?.us, add.atUs)}); first answer at the client ${since(first?.us, add.atUs)} after (slbctl vip add --wait took ${ms(p.addedUs - p.addUs)} in all, its start-up included)`,
    );
    c.note(
      `${p.vip} deleted: every agent applied it ${del.lastAckMs} ms after the controller took the request; the route was gone at the router ${since(gone?.us, del.atUs)} after; last answer at the client ${since(lastAnswer?.us, del.atUs)} after (route polls every ${Number.isFinite(resolution) ? ms(resolution) : '?'}; ${syns.length} SYNs to the VIP in all)`,
    );
  }
  // tshark recounts the SYN-ACKs from the new VIPs
  const filter = phases.map((p) => `${p.vip.includes(':') ? 'ipv6' : 'ip'}.src==${p.vip}`).join(' || ');
  const ts = tsharkFields(join(run, 'pcaps', 'client1.pcap'), ['frame.number'], `(${filter}) && tcp.flags.syn==1 && tcp.flags.ack==1`);
  c.check(
    ts !== null && ts.length === synAcksTotal,
    'tshark counts the same SYN-ACKs from the new VIPs',
    ts === null ? 'tshark is missing' : `tshark ${ts.length}, slbx ${synAcksTotal}`,
  );

  // ---- the existing VIPs' traffic, across every change
  const traffic = lines.find((l) => l[0] === 'traffic');
  const start = Number(traffic?.[1]);
  const end = Number(traffic?.[2]);
  const lastChange = Math.max(...phases.map((p) => p.deletedUs));
  c.check(
    traffic !== undefined && start < Math.min(...phases.map((p) => p.addUs)) && end > lastChange,
    'the traffic to the existing VIPs ran from before the first change until after the last',
    traffic === undefined ? 'no times' : `${ms(Math.min(...phases.map((p) => p.addUs)) - start)} before, ${ms(end - lastChange)} after`,
  );
  const files = need(f, 'existing').split(',');
  const statuses = need(f, 'existing-status').split(',');
  files.forEach((file, i) => {
    const j = readClientJson(file, 'http');
    const failed = j.records.filter((r) => !r.ok).length;
    c.check(
      statuses[i] === '0' && failed === 0 && j.summary.failed === 0 && j.records.length >= 100,
      `${j.target}: zero failed requests while VIPs were created and deleted`,
      `${j.records.length} requests, ${failed} failed, client exit ${statuses[i]}`,
    );
  });
  return c;
}
