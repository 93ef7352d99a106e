// The daemons' I/O path options, without namespaces: argument validation of --send-path and
// --receive-path (a bad value is refused with exit 2 and a message naming the option, the value and what is
// allowed, before the config is even read), the send offsets each MUX path hands to the kernel, the
// connected UDP sender and the VXLAN socket on loopback, and the synthesized outer header that lets the
// host agent's unchanged data plane run on datagrams. The paths' speed is measured by
// scripts/bench/send-paths.sh (docs/io-paths.md).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createSocket, type Socket } from 'node:dgram';
import { mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { dissect } from '../shared/dissect.js';
import { LINKTYPE_RAW } from '../shared/pcap-file.js';
import { compileMuxTables, ALL_HEALTHY } from '../mux/tables.js';
import { newMuxContext, processPacket, VERDICT_FORWARD } from '../mux/data-plane.js';
import { compileHostTables } from '../host-agent/tables.js';
import { newHostContext, processInbound, VERDICT_DROP } from '../host-agent/data-plane.js';
import { MUX_PROGRAM } from '../mux/main.js';
import { HOST_AGENT_PROGRAM } from '../host-agent/main.js';
import { DEFAULT_SEND_PATH, SEND_PATH_OFFSET } from '../mux/daemon.js';
import { DEFAULT_RECEIVE_PATH } from '../host-agent/daemon.js';
import { runDaemon } from '../runtime/daemon-main.js';
import { UdpRingSender } from '../runtime/udp-sender.js';
import { VxlanSocket, VXLAN_CARRIER_LEN, writeVxlanCarrier } from '../runtime/vxlan-socket.js';
import { labConfig, LAB_YAML_PATH } from './helpers/lab-config.js';

/** Runs a daemon's main in-process; returns its exit code and what it wrote. */
async function run(program: typeof MUX_PROGRAM, argv: string[]): Promise<{ code: number; stderr: string; stdout: string }> {
  let stderr = '';
  let stdout = '';
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => {
    stderr += String(s);
    return true;
  });
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => {
    stdout += String(s);
    return true;
  });
  try {
    const code = await runDaemon(program, argv);
    return { code, stderr, stdout };
  } finally {
    e.mockRestore();
    o.mockRestore();
  }
}

describe('slbx-mux --send-path', () => {
  it('refuses an unknown path with exit 2, naming the option, the value and the choices', async () => {
    const r = await run(MUX_PROGRAM, ['--config', LAB_YAML_PATH, '--name', 'mux1', '--send-path', 'nope']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('slbx-mux: --send-path must be one of cap, raw, udp (got "nope")\n');
  });

  it('checks the option before reading the config', async () => {
    const r = await run(MUX_PROGRAM, ['--config', '/nonexistent/slbx.yaml', '--name', 'mux1', '--send-path=UDP']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--send-path must be one of cap, raw, udp (got "UDP")');
    expect(r.stderr).not.toContain('cannot read');
  });

  it('refuses a missing value and a repeated option', async () => {
    const a = await run(MUX_PROGRAM, ['--config', LAB_YAML_PATH, '--name', 'mux1', '--send-path']);
    expect(a.code).toBe(2);
    expect(a.stderr).toContain('--send-path needs a value: --send-path PATH');
    const b = await run(MUX_PROGRAM, ['--config', LAB_YAML_PATH, '--name', 'mux1', '--send-path', 'raw', '--send-path', 'udp']);
    expect(b.code).toBe(2);
    expect(b.stderr).toContain('--send-path given twice');
  });

  it.each(['cap', 'raw', 'udp'])('accepts %s (and goes on to the config: here the mux name is unknown)', async (path) => {
    const r = await run(MUX_PROGRAM, ['--config', LAB_YAML_PATH, '--name', 'nosuch', '--send-path', path]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('no mux named "nosuch"');
  });

  it('documents the option, its default (cap) and what each path loses in --help', async () => {
    expect(DEFAULT_SEND_PATH).toBe('cap');
    const r = await run(MUX_PROGRAM, ['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/--send-path PATH\s+how VXLAN leaves: cap, raw or udp .*\(default cap\)/);
    expect(r.stdout).toContain('no per-flow fabric entropy');
    expect(r.stdout).toContain('docs/io-paths.md');
  });
});

describe('slbx-host-agent --receive-path', () => {
  it('refuses an unknown path with exit 2', async () => {
    const r = await run(HOST_AGENT_PROGRAM, ['--config', LAB_YAML_PATH, '--name', 'host1', '--receive-path', 'pcap']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('slbx-host-agent: --receive-path must be one of capture, udp (got "pcap")\n');
  });

  it.each(['capture', 'udp'])('accepts %s', async (path) => {
    const r = await run(HOST_AGENT_PROGRAM, ['--config', LAB_YAML_PATH, '--name', 'nosuch', '--receive-path', path]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('no host named "nosuch"');
  });

  it('documents the option and its default (capture) in --help', async () => {
    expect(DEFAULT_RECEIVE_PATH).toBe('capture');
    const r = await run(HOST_AGENT_PROGRAM, ['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/--receive-path PATH\s+how VXLAN comes in: capture or udp .*\(default capture\)/);
  });
});

describe('MUX send offsets: what each path hands to the kernel', () => {
  it('raw starts at the outer IPv4 header, udp at the VXLAN header, of the frame the data plane wrote', () => {
    const config = labConfig();
    const tables = compileMuxTables(config, ALL_HEALTHY, null, 1);
    for (const h of tables.hosts.values()) {
      h.mac.set(mac('02:00:00:00:00:21'));
      h.macKnown = true;
    }
    const ctx = newMuxContext({
      tables,
      localMac: mac('02:00:00:00:00:11'),
      localPa4: config.muxes[0]!.address.words[0]!,
      hashSeed: config.hashSeed,
      mtu: config.fabric.mtu,
      vxlanPort: config.fabric.vxlanPort,
      flowTable: config.flowTable,
    });
    const frame = pkt()
      .eth({ src: '02:00:00:00:00:01', dst: '02:00:00:00:00:11' })
      .ipv4({ src: '198.51.100.10', dst: '203.0.113.10' })
      .udp({ sport: 40000, dport: 7 })
      .payload('ping')
      .build();
    expect(processPacket(frame, frame.length, ctx)).toBe(VERDICT_FORWARD);
    expect(SEND_PATH_OFFSET.cap).toBe(0);
    const raw = dissect(ctx.out.subarray(SEND_PATH_OFFSET.raw, ctx.outLen), LINKTYPE_RAW);
    expect(raw.error).toBeUndefined();
    expect(raw.first('ipv4')).toMatchObject({
      src: '198.18.0.11',
      dst: ctx.lastNic!.host.pa.text,
      checksumOk: true,
      totalLength: ctx.outLen - 14,
    });
    expect(raw.first('vxlan')!.vni).toBe(5001);
    // udp: VXLAN flags (I) and VNI, then the inner Ethernet to the chosen nic
    const vx = ctx.out.subarray(SEND_PATH_OFFSET.udp, ctx.outLen);
    expect(vx[0]).toBe(0x08);
    expect((vx[4]! << 16) | (vx[5]! << 8) | vx[6]!).toBe(5001);
    expect(Buffer.from(vx.subarray(8, 14))).toEqual(Buffer.from(ctx.lastNic!.mac));
    expect(Buffer.from(vx.subarray(22))).toEqual(frame.subarray(14));
  });
});

const sockets: Socket[] = [];
const senders: UdpRingSender[] = [];
const vxSockets: VxlanSocket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.close();
  for (const s of senders.splice(0)) s.close();
  for (const s of vxSockets.splice(0)) s.close();
});

function receiver(): Promise<{ sock: Socket; port: number; got: Buffer[] }> {
  const sock = createSocket('udp4');
  sockets.push(sock);
  const got: Buffer[] = [];
  sock.on('message', (m) => got.push(m));
  return new Promise((resolve) => sock.bind(0, '127.0.0.1', () => resolve({ sock, port: sock.address().port, got })));
}

function connected(o: Omit<ConstructorParameters<typeof UdpRingSender>[0], 'onReady'>): Promise<UdpRingSender> {
  return new Promise((resolve, reject) => {
    const s: UdpRingSender = new UdpRingSender({ ...o, onReady: (e) => (e ? reject(e) : resolve(s)) });
    senders.push(s);
  });
}

const until = async (cond: () => boolean, ms = 2000) => {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('UdpRingSender (the MUX udp path) on loopback', () => {
  it('sends buf[off .. off + len) from a fixed local port and frees its slots', async () => {
    const rx = await receiver();
    const s = await connected({ family: 4, local: '127.0.0.1', remote: '127.0.0.1', port: rx.port, slots: 4, slotBytes: 1600 });
    const buf = Buffer.alloc(100);
    for (let i = 0; i < 20; i++) {
      buf.fill(i);
      expect(s.send(buf, 42, 50)).toBe(true);
      await until(() => s.queued === 0);
    }
    await until(() => rx.got.length === 20);
    rx.got.forEach((m, i) => expect(m).toEqual(Buffer.alloc(50, i)));
    expect(s.sent).toBe(20);
    expect(s.localPort).toBeGreaterThan(0);
    expect(s.ringFull + s.sendErrors + s.notConnected).toBe(0);
  });

  it('counts a full ring as a drop, never waits; a payload larger than a slot is refused', async () => {
    const rx = await receiver();
    const s = await connected({ family: 4, local: '127.0.0.1', remote: '127.0.0.1', port: rx.port, slots: 2, slotBytes: 64 });
    const buf = Buffer.alloc(64, 7);
    let ok = 0;
    for (let i = 0; i < 10; i++) if (s.send(buf, 0, 64)) ok++;
    expect(ok).toBe(2); // callbacks run on a later tick: the ring holds 2
    expect(s.ringFull).toBe(8);
    expect(s.send(buf, 0, 65)).toBe(false);
    await until(() => s.queued === 0);
    expect(s.tooBig + s.ringFull).toBe(9);
    await until(() => rx.got.length === 2);
  });

  it('refuses to send before it is connected', () => {
    const s = new UdpRingSender({ family: 4, local: '127.0.0.1', remote: '127.0.0.1', port: 9, slots: 2, slotBytes: 64 });
    senders.push(s);
    expect(s.send(Buffer.alloc(8), 0, 8)).toBe(false);
    expect(s.notConnected).toBe(1);
  });

  it('survives ICMP port unreachable (ECONNREFUSED): counted, the process lives on', async () => {
    // a port nobody listens on: bind one, note it, close it
    const tmp = await receiver();
    const port = tmp.port;
    tmp.sock.close();
    sockets.splice(sockets.indexOf(tmp.sock), 1);
    const s = await connected({ family: 4, local: '127.0.0.1', remote: '127.0.0.1', port, slots: 8, slotBytes: 64 });
    const buf = Buffer.alloc(16);
    for (let i = 0; i < 20 && s.sendErrors === 0; i++) {
      s.send(buf, 0, 16);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(s.sendErrors).toBeGreaterThan(0);
    expect(s.lastSendError).toMatch(/ECONNREFUSED/);
  });
});

describe('the host agent udp receive path: datagram -> synthesized frame -> unchanged data plane', () => {
  const config = labConfig();
  const PORT_MACS = [mac('02:00:00:01:00:01'), mac('02:00:00:01:00:02')];
  const newCtx = (vxlanPort = config.fabric.vxlanPort) => newHostContext(compileHostTables(config, 'host1', 1), vxlanPort, PORT_MACS);
  const wire = () =>
    pkt()
      .eth({ src: '02:00:00:00:00:11', dst: '02:00:00:00:00:21' })
      .ipv4({ src: '198.18.0.11', dst: '198.18.0.21', id: 0 })
      .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
      .vxlan({ vni: 5001 })
      .eth({ src: '02:00:00:00:00:11', dst: '02:00:c0:00:02:0a' })
      .ipv4({ src: '198.51.100.10', dst: '203.0.113.10' })
      .udp({ sport: 40000, dport: 7 })
      .payload('ping')
      .build();
  const pa4 = config.hosts[0]!.address.words[0]!;
  const mux4 = config.muxes[0]!.address.words[0]!;

  it('delivers the same frame to the same port as the capture path does', () => {
    const captured = wire();
    const a = newCtx();
    expect(processInbound(captured, captured.length, a)).toBe(1);
    const fromCapture = Buffer.from(a.outBuf.subarray(a.outOff, a.outOff + a.outLen));

    const payload = wire().subarray(42); // what the UDP socket hands us: VXLAN header onwards (the NAT rewrote `captured`)
    const frame = Buffer.alloc(VXLAN_CARRIER_LEN + payload.length);
    expect(writeVxlanCarrier(frame, mac('02:00:00:00:00:21'), mux4, 51000, pa4, 4789, payload.length)).toBe(42);
    payload.copy(frame, VXLAN_CARRIER_LEN);
    expect(dissect(frame).first('ipv4')!.checksumOk).toBe(true);
    const b = newCtx();
    expect(processInbound(frame, frame.length, b)).toBe(1);
    expect(b.outPort).toBe(a.outPort);
    expect(Buffer.from(b.outBuf.subarray(b.outOff, b.outOff + b.outLen))).toEqual(fromCapture);
  });

  it('keeps the trusted-source check: a source outside the config is dropped as unknown_source', () => {
    const payload = wire().subarray(42);
    const frame = Buffer.alloc(VXLAN_CARRIER_LEN + payload.length);
    writeVxlanCarrier(frame, mac('02:00:00:00:00:21'), 0, 51000, pa4, 4789, payload.length);
    payload.copy(frame, VXLAN_CARRIER_LEN);
    const ctx = newCtx();
    expect(processInbound(frame, frame.length, ctx)).toBe(VERDICT_DROP);
    expect(ctx.counters.names[ctx.lastDrop]).toBe('drop_in_unknown_source');
  });

  it('VxlanSocket on loopback: maps the datagram source through the config, unknown sources to 0.0.0.0', async () => {
    const free = await receiver();
    const port = free.port;
    free.sock.close();
    sockets.splice(sockets.indexOf(free.sock), 1);
    // loopback stands in for the fabric: 127.0.0.1 is "the MUX" (198.18.0.11), 127.0.0.2 is nobody
    const vs = new VxlanSocket({ pa: '127.0.0.1', pa4, port, mac: mac('02:00:00:00:00:21'), sources: new Map([['127.0.0.1', mux4]]) });
    vxSockets.push(vs);
    const seen: { verdict: number; drop: string | null; src: string }[] = [];
    const ctx = newCtx(port); // an unprivileged stand-in for 4789
    await new Promise<void>((resolve, reject) =>
      vs.open(
        (f, len) => {
          const v = processInbound(f, len, ctx);
          seen.push({
            verdict: v,
            drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop]! : null,
            src: dissect(f.subarray(0, len)).first('ipv4')?.src ?? '?',
          });
        },
        (e) => (e ? reject(e) : resolve()),
        () => {},
      ),
    );
    const payload = wire().subarray(42);
    const from1 = createSocket('udp4');
    const from2 = createSocket('udp4');
    sockets.push(from1, from2);
    await new Promise<void>((r) => from1.bind(0, '127.0.0.1', () => r()));
    await new Promise<void>((r) => from2.bind(0, '127.0.0.2', () => r()));
    from1.send(payload, port, '127.0.0.1');
    await until(() => seen.length === 1);
    from2.send(payload, port, '127.0.0.1');
    await until(() => seen.length === 2);
    expect(seen[0]).toEqual({ verdict: 1, drop: null, src: '198.18.0.11' });
    expect(seen[1]).toEqual({ verdict: 0, drop: 'drop_in_unknown_source', src: '0.0.0.0' });
    expect(vs.received).toBe(2);
  });
});
