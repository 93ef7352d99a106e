// Verifier of scenario 23-backend-removed: a backend removed from its pool while long-lived connections
// run to it. From the run's files:
//   RUN/hold.json                     the lab client's record of each long-lived connection
//   RUN/del.json                      slbctl --json backend del ... --wait (the change and every agent's ack)
//   RUN/counters-MUX-{before,after}.json  each MUX's GET /counters just before the change and after the hold
//   RUN/new.json                      the new connections made after the change
//   RUN/pcaps/MUX.pcap                every MUX's fabric side (the VXLAN it sent: inner MAC = the backend)
//   RUN/pcaps/NIC.pcap                every backend's eth0 (TCP port 80)
//   RUN/pcaps/client1.pcap            the client's eth0 (TCP port 80)
// Claims (docs/reliability.md, "A removed backend is gone; a drained one finishes its flows"):
//   1. every connection on the removed backend is re-placed by its MUX at its next packet onto exactly one
//      other backend, which resets it (that packet is its next request, or the ACK of an answer that
//      crossed the change: then the reset comes while it is idle); the client saw the reset; the MUXes
//      counted each re-placement (flow_replaced grows by exactly that number);
//   2. nothing reaches the removed backend once every MUX applied the change; no new connection does;
//   3. every connection on the other backends completes on its backend.
// Usage: verify.js backend-removed --run R --vip A --port N --removed NIC --change-us T --applied-us T
//        --connections N --hold-status S
import { join } from 'node:path';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, tsharkFields, type CapturedPacket } from './check.js';
import { ipOf, readJson } from './bgp.js';
import { readClientRecordsOf, type HoldRecord } from '../../lab/client.js';

const TCP_SYN = 0x02;
const TCP_RST = 0x04;
const TCP_ACK = 0x10;

/** The VXLAN frame's inner flow (client address:port) and the backend MAC the MUX chose, or null. */
function innerOf(p: CapturedPacket): { key: string; mac: string; flags: number; dport: number; len: number } | null {
  const layers = p.d.layers;
  const vx = layers.findIndex((l) => l.layer === 'vxlan');
  if (vx < 0) return null;
  const inner = layers.slice(vx);
  const eth = inner.find((l) => l.layer === 'eth') as { dst: string } | undefined;
  const ip = inner.find((l) => l.layer === 'ipv4' || l.layer === 'ipv6') as { src: string } | undefined;
  const tcp = inner.find((l) => l.layer === 'tcp') as { srcPort: number; dstPort: number; flags: number; payloadLen: number } | undefined;
  if (eth === undefined || ip === undefined || tcp === undefined) return null;
  return { key: `${ip.src}:${tcp.srcPort}`, mac: eth.dst, flags: tcp.flags, dport: tcp.dstPort, len: tcp.payloadLen };
}

const ms = (us: number) => `${(us / 1000).toFixed(0)} ms`;

export function verifyBackendRemoved(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = need(f, 'vip');
  const port = Number(need(f, 'port'));
  const removed = need(f, 'removed');
  const changeUs = Number(need(f, 'change-us'));
  const appliedUs = Number(need(f, 'applied-us'));
  const connections = Number(need(f, 'connections'));
  const holdStatus = Number(need(f, 'hold-status'));
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const macOf = (n: { mac: Uint8Array }) => Buffer.from(n.mac).toString('hex').match(/../g)!.join(':');
  const nicByMac = new Map(config.nics.map((n) => [macOf(n), n.name]));
  const nicAddr = new Map(config.nics.map((n) => [n.name, n.address4?.text ?? '']));
  const removedMac = macOf(config.nics.find((n) => n.name === removed)!);
  const others = config.pools
    .find((p) => p.name === 'web')!
    .backends.map((b) => b.nic)
    .filter((n) => n !== removed);

  // 0. the change itself
  const del = readJson(join(run, 'del.json'));
  const rep = del.applied;
  c.check(
    del.changed === true && rep?.complete === true,
    `${removed} was removed from pool web through the API and every agent applied it (generation ${del.generation})`,
    `last MUX ${rep?.lastMuxAckMs} ms, every agent ${rep?.lastAckMs} ms after the call; ${ms(appliedUs - changeUs)} until slbctl --wait returned`,
  );

  // 1. the client's records
  const recs = readClientRecordsOf(join(run, 'hold.json'), 'hold');
  const key = (r: HoldRecord) => `${r.sourceAddress}:${r.sourcePort}`;
  const mine = recs.filter((r) => r.backends[0] === removed);
  const theirs = recs.filter((r) => r.backends[0] !== removed);
  c.check(
    recs.length === connections && recs.every((r) => r.sourcePort !== null && r.answered >= 3),
    `all ${connections} long-lived connections opened and were answered at least 3 times before the change`,
    `${recs.length} records; fewest answers on one connection: ${Math.min(...recs.map((r) => r.answered))}`,
  );
  c.check(
    mine.length >= 10 && theirs.length >= 3 * 10,
    `connections on ${removed} and on the others (their share of the Maglev table)`,
    fmtCounts(countBy(recs, (r) => r.backends[0] ?? 'none')),
  );
  const fine = theirs.filter(
    (r) => r.ok && r.error === null && r.backends.length === 1 && others.includes(r.backends[0]!) && r.answered === r.requests,
  );
  c.check(
    theirs.length > 0 && fine.length === theirs.length,
    `each of the ${theirs.length} connections on the other backends completed on its backend, every request answered`,
    `${fine.length} of ${theirs.length}; ${fmtCounts(
      countBy(
        theirs.filter((r) => !fine.includes(r)),
        (r) => r.error ?? 'moved',
      ),
    )}`,
  );
  c.check(
    holdStatus === (mine.length > 0 ? 1 : 0),
    'the hold client exited 1 (some connections failed), as the records say',
    `exit status ${holdStatus}`,
  );

  // 2. the MUXes: where each connection's packets went, before and after the change. The router keeps a
  // connection on one MUX, except after a TCP retransmission timeout: Linux then picks a new flow hash
  // for the socket (sk_rethink_txhash), which the lab router's ECMP follows. A connection on the removed
  // backend that sent a packet in the moment between its host agent applying the change (which stops
  // delivering to the backend at once) and its MUX applying it (a Maglev rebuild, tens of ms) loses that
  // packet, and its retransmission may take the other MUX, which has no entry and places it afresh by the
  // same new table (counted there as flow_new). Both cases are counted below, each exactly.
  interface Seen {
    muxBefore: Set<string>;
    before: Set<string>;
    after: Set<string>;
    afterAtOwn: number;
    afterElsewhere: number;
  }
  const seen = new Map<string, Seen>();
  let toRemovedAfter = 0;
  let synAfter = 0;
  let toRemovedBefore = 0;
  const late: string[] = [];
  const pkts: { mux: string; us: number; key: string; nic: string; removed: boolean; len: number }[] = [];
  for (const m of config.muxes) {
    for (const p of loadCapture(join(run, 'pcaps', `${m.name}.pcap`))) {
      const x = innerOf(p);
      if (x === null || x.dport !== port) continue;
      if (x.mac === removedMac && p.tsUs < changeUs) toRemovedBefore++;
      if (p.tsUs > appliedUs) {
        if (x.mac === removedMac) {
          toRemovedAfter++;
          if (late.length < 5) late.push(`${m.name} #${p.index} ${x.key}`);
        }
        if ((x.flags & (TCP_SYN | TCP_ACK)) === TCP_SYN) synAfter++;
      }
      pkts.push({ mux: m.name, us: p.tsUs, key: x.key, nic: nicByMac.get(x.mac) ?? x.mac, removed: x.mac === removedMac, len: x.len });
    }
  }
  for (const x of pkts) {
    let s = seen.get(x.key);
    if (s === undefined) {
      s = { muxBefore: new Set(), before: new Set(), after: new Set(), afterAtOwn: 0, afterElsewhere: 0 };
      seen.set(x.key, s);
    }
    if (x.us < changeUs) {
      s.before.add(x.nic);
      s.muxBefore.add(x.mux);
    }
  }
  for (const x of pkts) {
    const s = seen.get(x.key)!;
    if (x.us < changeUs || x.removed) continue;
    s.after.add(x.nic);
    if (s.muxBefore.has(x.mux)) s.afterAtOwn++;
    else s.afterElsewhere++;
  }
  c.check(
    toRemovedBefore > 0 && toRemovedAfter === 0,
    `no VXLAN to ${removed} once every MUX applied the change`,
    `${toRemovedBefore} VXLAN packets to ${removed} before the change, ${toRemovedAfter} after it was applied${late.length > 0 ? ` (${late.join(', ')})` : ''}`,
  );
  // The first packet of each such connection that a MUX re-placed: its next request (the reset answers
  // that request: one request unanswered), or the ACK of an answer that crossed the change (the request
  // reached the removed backend just before the MUX applied it, the client's ACK of the answer just
  // after: the reset comes while the connection is idle, every request answered).
  const firstAfter = new Map<string, { us: number; len: number }>();
  for (const x of pkts) {
    if (x.us < changeUs || x.removed) continue;
    const f = firstAfter.get(x.key);
    if (f === undefined || x.us < f.us) firstAfter.set(x.key, { us: x.us, len: x.len });
  }
  const atAck = (r: HoldRecord) => firstAfter.get(key(r))?.len === 0;
  const reset = mine.filter(
    (r) =>
      !r.ok &&
      r.error === 'ECONNRESET' &&
      r.backends.length === 1 &&
      firstAfter.has(key(r)) &&
      r.answered === (atAck(r) ? r.requests : r.requests - 1),
  );
  c.check(
    mine.length > 0 && reset.length === mine.length,
    `each of the ${mine.length} connections on ${removed} was reset at its first packet after the change (its next request, or the ACK of an answer that crossed the change), never answered by another backend`,
    `${reset.length} of ${mine.length} (${reset.filter((r) => !atAck(r)).length} at a request, ${reset.filter(atAck).length} at an ACK); ${
      fmtCounts(
        countBy(
          mine.filter((r) => !reset.includes(r)),
          (r) =>
            `${r.error ?? 'ok'} (${r.answered}/${r.requests} answered, backends ${r.backends.join('+')}, first packet re-placed: ${
              firstAfter.has(key(r)) ? (atAck(r) ? 'an ACK' : 'data') : 'none'
            })`,
        ),
      ) || 'no other outcome'
    }`,
  );
  const replacedOk: string[] = [];
  const newNic = new Map<string, string>();
  const bad: string[] = [];
  for (const r of mine) {
    const s = seen.get(key(r));
    const ok =
      s !== undefined &&
      s.muxBefore.size === 1 &&
      s.before.size === 1 &&
      s.before.has(removed) &&
      s.after.size === 1 &&
      others.includes([...s.after][0]!);
    if (ok) {
      replacedOk.push(key(r));
      newNic.set(key(r), [...s.after][0]!);
    } else if (bad.length < 5)
      bad.push(`${key(r)}: before ${[...(s?.before ?? [])].join('+') || 'none'}, after ${[...(s?.after ?? [])].join('+') || 'none'}`);
  }
  const atOwn = mine.filter((r) => (seen.get(key(r))?.afterAtOwn ?? 0) > 0);
  const moved = recs.filter((r) => (seen.get(key(r))?.afterElsewhere ?? 0) > 0);
  const movedMine = moved.filter((r) => r.backends[0] === removed);
  c.check(
    mine.length > 0 && replacedOk.length === mine.length,
    `each connection on ${removed} went on to exactly one other backend of the pool after the change, the same at either MUX (the new table)`,
    `${replacedOk.length} of ${mine.length}; now on ${fmtCounts(countBy(newNic.values(), (n) => n))}${bad.length > 0 ? `; ${bad.join('; ')}` : ''}`,
  );
  c.check(
    atOwn.length > 0 && atOwn.length + movedMine.length >= mine.length,
    `the MUX that carried each re-placed it at its next packet (or, after a packet lost in the moment before that MUX applied the change, the other MUX placed its retransmission)`,
    `${atOwn.length} re-placed by their own MUX, ${movedMine.length} retransmitted through the other MUX, of ${mine.length}`,
  );
  const stayed = theirs.filter((r) => {
    const s = seen.get(key(r));
    return s !== undefined && s.before.size === 1 && s.before.has(r.backends[0]!) && [...s.after].every((n) => n === r.backends[0]);
  });
  c.check(
    stayed.length === theirs.length,
    "every other connection's packets went to its own backend before and after the change",
    `${stayed.length} of ${theirs.length}`,
  );
  const d = (m: string, k: string) =>
    Number(readJson(join(run, `counters-${m}-after.json`))[k] ?? 0) - Number(readJson(join(run, `counters-${m}-before.json`))[k] ?? 0);
  const sum = (k: string) => config.muxes.reduce((a, m) => a + d(m.name, k), 0);
  c.check(
    sum('flow_replaced') === atOwn.length && sum('flow_new') === moved.length,
    `the MUXes counted each: flow_replaced grew by exactly the ${atOwn.length} connections re-placed by their own MUX, flow_new by exactly the ${moved.length} that reached the other MUX`,
    config.muxes.map((m) => `${m.name} flow_replaced +${d(m.name, 'flow_replaced')}, flow_new +${d(m.name, 'flow_new')}`).join('; '),
  );

  // 3. the backends that received them reset them; the client got each reset from the VIP
  const rstFrom = new Map<string, Set<string>>(); // nic -> client keys it reset after the change
  for (const n of others) {
    const addr = nicAddr.get(n);
    const set = new Set<string>();
    for (const p of loadCapture(join(run, 'pcaps', `${n}.pcap`))) {
      const ip = ipOf(p);
      const t = p.d.first('tcp');
      if (ip === undefined || t === undefined || p.tsUs < changeUs) continue;
      if (ip.src === addr && t.srcPort === port && (t.flags & TCP_RST) !== 0) set.add(`${ip.dst}:${t.dstPort}`);
    }
    rstFrom.set(n, set);
  }
  const resetByNew = mine.filter((r) => {
    const n = newNic.get(key(r));
    return n !== undefined && rstFrom.get(n)!.has(key(r));
  });
  c.check(
    mine.length > 0 && resetByNew.length === mine.length,
    'the backend each was re-placed onto had no such connection and answered with a reset (its own capture)',
    `${resetByNew.length} of ${mine.length}`,
  );
  const clientCap = loadCapture(join(run, 'pcaps', 'client1.pcap'));
  const vipRst = new Set<string>();
  let vipRstPkts = 0;
  const clientAfter = new Set<string>();
  for (const p of clientCap) {
    const ip = ipOf(p);
    const t = p.d.first('tcp');
    if (ip === undefined || t === undefined) continue;
    if (ip.src === vip && t.srcPort === port && (t.flags & TCP_RST) !== 0) {
      vipRstPkts++;
      if (p.tsUs >= changeUs) vipRst.add(`${ip.dst}:${t.dstPort}`);
    }
    if (ip.dst === vip && t.dstPort === port && p.tsUs >= changeUs) clientAfter.add(`${ip.src}:${t.srcPort}`);
  }
  c.check(
    recs.every((r) => clientAfter.has(key(r))),
    'every long-lived connection outlived the change (the client sent on each after the API call)',
    `${recs.filter((r) => clientAfter.has(key(r))).length} of ${recs.length}`,
  );
  const gotRst = mine.filter((r) => vipRst.has(key(r)));
  c.check(
    mine.length > 0 && gotRst.length === mine.length && theirs.every((r) => !vipRst.has(key(r))),
    `the client received the reset from ${vip}:${port} on each of them (direct server return), and on no other long-lived connection`,
    `${gotRst.length} of ${mine.length}; ${theirs.filter((r) => vipRst.has(key(r))).length} others`,
  );
  const tsRst = tsharkFields(
    join(run, 'pcaps', 'client1.pcap'),
    ['frame.number'],
    `ip.src == ${vip} && tcp.srcport == ${port} && tcp.flags.reset == 1`,
  );
  c.check(
    tsRst !== null && tsRst.length === vipRstPkts,
    `tshark counts the same resets from ${vip}:${port} in the client's capture`,
    tsRst === null ? 'tshark is not installed: the cross-check cannot run' : `tshark ${tsRst.length}, slbx ${vipRstPkts}`,
  );

  // 4. the removed backend's own capture, and new connections
  const addr = nicAddr.get(removed);
  const clients = new Set(recs.map((r) => r.sourceAddress));
  let inBefore = 0;
  let inAfter = 0;
  for (const p of loadCapture(join(run, 'pcaps', `${removed}.pcap`))) {
    const ip = ipOf(p);
    const t = p.d.first('tcp');
    if (ip === undefined || t === undefined || ip.dst !== addr || !clients.has(ip.src)) continue;
    if (p.tsUs < changeUs) inBefore++;
    else if (p.tsUs > appliedUs) inAfter++;
  }
  c.check(
    inBefore > 0 && inAfter === 0,
    `${removed}'s own capture: client packets before the change, none after it was applied`,
    `${inBefore} before, ${inAfter} after`,
  );
  const freshRecs = readClientRecordsOf(join(run, 'new.json'), 'http');
  const per = countBy(
    freshRecs.filter((r) => r.ok),
    (r) => r.backend ?? '?',
  );
  c.check(
    freshRecs.length > 0 && freshRecs.every((r) => r.ok) && !per.has(removed) && others.every((n) => per.has(n)),
    `${freshRecs.length} new connections after the change all succeeded, none on ${removed}, each other backend took some`,
    `${fmtCounts(per)}; ${freshRecs.filter((r) => !r.ok).length} failed`,
  );
  c.check(
    synAfter >= freshRecs.length,
    "the MUXes' captures hold those new connections (SYNs after the change), none of them to the removed backend",
    `${synAfter} SYNs after the change was applied`,
  );
  return c;
}
