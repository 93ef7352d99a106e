// The daemons' common main with --controller (runtime/daemon-main.ts), run in-process with a stand-in
// daemon (no capture, no namespaces) against a controller on 127.0.0.1: the daemon is created from
// the first policy when there is no --config, later generations reach applyConfig, GET /status shows
// the controller connection, heartbeats reach the controller, argument errors exit 2.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { SlbxConfig } from '../shared/config.js';
import { runDaemon, type Daemon, type DaemonProgram } from '../runtime/daemon-main.js';
import type { AppliedPolicy } from '../runtime/policy-client.js';
import { requestJson } from '../runtime/http-json.js';
import { startTestController, type TestController } from './helpers/controller.js';

class FakeDaemon implements Daemon {
  started = 0;
  stopped = 0;
  applied: SlbxConfig[] = [];
  constructor(readonly config: SlbxConfig) {}
  start(): void {
    this.started++;
  }
  stop(): void {
    this.stopped++;
  }
  applyConfig(config: SlbxConfig): void {
    this.applied.push(config);
  }
}

function fakeProgram(created: FakeDaemon[]): DaemonProgram {
  return {
    program: 'slbx-mux',
    usage: 'fake',
    about: 'a stand-in MUX',
    options: [],
    defaultStatus: '127.0.0.1:9180',
    extraHelp: '',
    create(_args, config) {
      const d = new FakeDaemon(config);
      created.push(d);
      return d;
    },
    routes(daemon) {
      const d = daemon as FakeDaemon;
      return (path) =>
        path === '/status' ? { daemon: 'mux', ready: true, applied: d.applied.length } : path === '/flows' ? [] : undefined;
    },
  };
}

const until = async (what: string, f: () => boolean | Promise<boolean>, ms = 5000) => {
  const t0 = Date.now();
  while (!(await f())) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

/** Runs runDaemon in-process; stop() calls the SIGTERM listener it installed (no real signal). */
function start(program: DaemonProgram, argv: string[]) {
  const before = new Set([...process.listeners('SIGTERM'), ...process.listeners('SIGINT'), ...process.listeners('SIGHUP')]);
  vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  const done = runDaemon(program, argv);
  const added = () => ({
    term: process.listeners('SIGTERM').filter((l) => !before.has(l)),
    int: process.listeners('SIGINT').filter((l) => !before.has(l)),
    hup: process.listeners('SIGHUP').filter((l) => !before.has(l)),
  });
  return {
    done,
    async stop(): Promise<number> {
      const a = added();
      for (const l of a.term) (l as () => void)();
      const code = await done;
      for (const l of a.term) process.removeListener('SIGTERM', l);
      for (const l of a.int) process.removeListener('SIGINT', l);
      for (const l of a.hup) process.removeListener('SIGHUP', l);
      return code;
    },
  };
}

describe('daemon main with --controller', () => {
  let ctl: TestController;
  afterEach(async () => {
    vi.restoreAllMocks();
    await ctl?.cleanup();
  });

  it('without --config: the first policy creates the daemon; changes are applied; /status and heartbeats show the controller', async () => {
    ctl = await startTestController();
    const created: FakeDaemon[] = [];
    const port = 20000 + Math.floor(Math.random() * 20000);
    const d = start(fakeProgram(created), ['--controller', ctl.url, '--name', 'mux1', '--status', `127.0.0.1:${port}`]);
    await until('daemon created', () => created.length === 1);
    expect(created[0]!.started).toBe(1);
    expect(created[0]!.config.muxes.map((m) => m.name)).toEqual(['mux1', 'mux2']);
    const status = async () => (await requestJson(new URL(`http://127.0.0.1:${port}/status`))).body as any;
    await until('status', async () => (await status().catch(() => null))?.controller?.connection === 'connected');
    expect((await status()).controller).toMatchObject({ appliedGeneration: 1, url: `${ctl.url}/` });
    // a change: the default applyPolicy hands the new config to applyConfig
    await ctl.req('PATCH', '/v1/pools/web/backends/h1vm1', { drain: true });
    await until('applied', () => created[0]!.applied.length === 1);
    expect(created[0]!.applied[0]!.pools[0]!.backends[0]!.drain).toBe(true);
    await until(
      'acked',
      async () => ((await ctl.req('GET', '/v1/agents')).body as any[]).find((a) => a.name === 'mux1').appliedGeneration === 2,
    );
    // the heartbeat carries the daemon's status
    await until('heartbeat', async () => (await ctl.req('GET', '/v1/agents/mux/mux1/status')).status === 200);
    const hb = (await ctl.req('GET', '/v1/agents/mux/mux1/status')).body as any;
    expect(hb.status.status).toMatchObject({ daemon: 'mux', ready: true });
    expect(hb.status.flows).toEqual([]);
    expect(await d.stop()).toBe(0);
    expect(created[0]!.stopped).toBe(1);
  });

  it('without --config: the first policy also goes to applyPolicy, for what creating the daemon does not take (health, outbound NAT ranges)', async () => {
    ctl = await startTestController();
    const created: FakeDaemon[] = [];
    const policies: AppliedPolicy[] = [];
    const program = { ...fakeProgram(created), applyPolicy: (_d: Daemon, p: AppliedPolicy) => void policies.push(p) };
    const port = 20000 + Math.floor(Math.random() * 20000);
    const d = start(program, ['--controller', ctl.url, '--name', 'mux1', '--status', `127.0.0.1:${port}`]);
    await until('daemon created', () => created.length === 1);
    await until('first policy applied', () => policies.length === 1);
    expect(policies[0]).toMatchObject({ generation: 1, configChanged: false, snat: [] });
    expect(policies[0]!.healthView.isHealthy('h1vm1', 'http80')).toBe(true);
    expect(await d.stop()).toBe(0);
  });

  it('argument errors exit 2 before anything starts', async () => {
    ctl = await startTestController();
    const created: FakeDaemon[] = [];
    let err = '';
    vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => {
      err += String(s);
      return true;
    });
    expect(await runDaemon(fakeProgram(created), ['--name', 'mux1'])).toBe(2);
    expect(err).toContain('--config and --name are required (or --controller URL and --name');
    expect(await runDaemon(fakeProgram(created), ['--name', 'mux1', '--controller', 'https://198.18.0.5:8480'])).toBe(2);
    expect(err).toContain('--controller: only http:// URLs are supported');
    expect(created).toHaveLength(0);
  });
});
