// Scenario 21's extraction of the docs' commands (scripts/scenarios/lib/docs-examples.ts), without a lab:
// what counts as a command, how it is pointed at the scenario's lab, that every command of README.md and
// docs/lab.md is either run (with the checks of what the docs say it shows) or excluded with a reason,
// and that those checks fail on the outputs they must refuse. The outputs below were copied from a lab.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import {
  CHECKS,
  DOC_FILES,
  EXCLUDED,
  extractCommands,
  labCommand,
  planDocs,
  rewriteForLab,
  runOrder,
  splitComment,
  unusedChecks,
} from '../scripts/scenarios/lib/docs-examples.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const realDocs = () => DOC_FILES.map((f) => ({ file: f, text: readFileSync(join(ROOT, f), 'utf8') }));
const checkOf = (doc: string) => {
  const k = CHECKS.filter((c) => c.pattern.test(doc));
  expect(k, doc).toHaveLength(1);
  return k[0]!;
};

describe('docs examples: extraction', () => {
  it('splits a trailing comment off, but not a # inside quotes or inside a word', () => {
    expect(splitComment('scripts/lab.sh up   # examples/lab.yaml; --name N')).toEqual({
      text: 'scripts/lab.sh up',
      comment: 'examples/lab.yaml; --name N',
    });
    expect(splitComment("curl -s 'http://x/#frag' # c")).toEqual({ text: "curl -s 'http://x/#frag'", comment: 'c' });
    expect(splitComment('echo "a # b"')).toEqual({ text: 'echo "a # b"', comment: '' });
    expect(splitComment('echo a#b')).toEqual({ text: 'echo a#b', comment: '' });
    expect(splitComment('# only a comment')).toEqual({ text: '', comment: 'only a comment' });
  });

  it('takes every line of sh, bash and shell blocks (continuations joined), and nothing from other blocks', () => {
    const md = [
      'text `scripts/lab.sh up` inline is not a command', // 1
      '```sh', //                                            2
      'scripts/lab.sh up      # bring it up', //            3
      '', //                                                 4
      '# a comment line', //                                 5
      'scripts/lab.sh exec client1 \\', //                   6
      '   curl -s http://203.0.113.10/', //                  7
      '```', //                                              8
      '```', //                                              9
      'lab.yaml:24:10: networks[0].vni: output, not a command', // 10
      '```', //                                              11
      '  ```bash', //                                        12
      '  scripts/lab.sh down', //                            13
      '  ```', //                                            14
      '```shell', //                                         15
      'node dist/cli/slbctl.js agents', //                   16
      '```', //                                              17
      '```ts', //                                            18
      'const notShell = 1;', //                              19
      '```', //                                              20
    ].join('\n');
    expect(extractCommands(md, 'X.md')).toEqual([
      { file: 'X.md', line: 3, text: 'scripts/lab.sh up', comment: 'bring it up' },
      { file: 'X.md', line: 6, text: 'scripts/lab.sh exec client1 curl -s http://203.0.113.10/', comment: '' },
      { file: 'X.md', line: 13, text: 'scripts/lab.sh down', comment: '' },
      { file: 'X.md', line: 16, text: 'node dist/cli/slbctl.js agents', comment: '' },
    ]);
  });

  it("points each scripts/lab.sh command at the scenario's lab, a --name X at LAB-X, runs/lab/default/ and /tmp/ at its own", () => {
    const r = (t: string) => rewriteForLab(t, 'sc21-7', '/w');
    expect(r('scripts/lab.sh up')).toBe('scripts/lab.sh up --name sc21-7');
    expect(r('scripts/lab.sh up --name big --muxes 8')).toBe('scripts/lab.sh up --name sc21-7-big --muxes 8');
    expect(r('scripts/lab.sh up --muxes 8 --name=big')).toBe('scripts/lab.sh up --muxes 8 --name=sc21-7-big');
    expect(r('scripts/lab.sh status')).toBe('scripts/lab.sh status --name sc21-7');
    expect(r('scripts/lab.sh birdc show route all 203.0.113.10/32')).toBe(
      'scripts/lab.sh birdc --name sc21-7 show route all 203.0.113.10/32',
    );
    expect(r("scripts/lab.sh exec client1 curl -s 'http://[2001:db8:ff::10]/'")).toBe(
      "scripts/lab.sh exec --name sc21-7 client1 curl -s 'http://[2001:db8:ff::10]/'",
    );
    expect(r('scripts/lab.sh exec router birdc -s runs/lab/default/bird.ctl show route')).toBe(
      'scripts/lab.sh exec --name sc21-7 router birdc -s runs/lab/sc21-7/bird.ctl show route',
    );
    expect(r('scripts/lab.sh down')).toBe('scripts/lab.sh down --name sc21-7');
    expect(r('scripts/lab.sh list')).toBe('scripts/lab.sh list');
    expect(r('node dist/cli/replay.js --in /tmp/client.pcap --out /tmp/fabric.pcap')).toBe(
      'node dist/cli/replay.js --in /w/client.pcap --out /w/fabric.pcap',
    );
    expect(labCommand('scripts/lab.sh up --name big --muxes 8')).toEqual({ sub: 'up', name: 'big' });
    expect(labCommand('node dist/cli/slbctl.js agents')).toBeNull();
  });
});

describe('docs examples: the plan over README.md and docs/lab.md', () => {
  const plan = planDocs(realDocs(), 'L', '/w');

  it('every command is run or excluded with a reason; the lab comes up first and goes down last; every check has its command', () => {
    expect(plan.length).toBeGreaterThan(20);
    for (const e of plan) expect(e.excluded === null || e.excluded.length > 20, e.doc).toBe(true);
    const { order, problems } = runOrder(plan);
    expect(problems).toEqual([]);
    expect(order[0]!.run).toBe('scripts/lab.sh up --name L');
    expect(order[order.length - 1]!.run).toBe('scripts/lab.sh down --name L');
    expect(order.length + plan.filter((e) => e.excluded !== null).length).toBe(plan.length);
    expect(unusedChecks(plan).map((k) => k.what)).toEqual([]);
    // the commands of issue 11 point 9 are run, with a check of what they show
    for (const doc of [
      'scripts/lab.sh exec controller node dist/cli/slbctl.js backend drain web h1vm1 --wait',
      'scripts/lab.sh exec controller node dist/cli/slbctl.js counters',
    ]) {
      const e = plan.find((x) => x.doc === doc);
      expect(e?.excluded, doc).toBeNull();
      expect(e!.checks.length, doc).toBeGreaterThan(0);
    }
    // the long ones are excluded, each by an explicit entry
    for (const doc of ['scripts/demo.sh', 'scripts/test.sh', 'scripts/bench.sh'])
      expect(plan.find((x) => x.doc === doc)?.excluded, doc).toMatch(/\w/);
    expect(EXCLUDED.length).toBeGreaterThanOrEqual(5);
  });

  it('a new example in the docs is in the plan the day it is written: run if it can, excluded only by an explicit entry', () => {
    const docs = realDocs();
    docs[1] = {
      ...docs[1]!,
      text: `${docs[1]!.text}\n\`\`\`sh\nscripts/lab.sh exec client1 curl -s http://203.0.113.10:8080/   # a new example\nscripts/soak.sh 60\n\`\`\`\n`,
    };
    const p = planDocs(docs, 'L', '/w');
    const added = p.find((e) => e.doc === 'scripts/lab.sh exec client1 curl -s http://203.0.113.10:8080/')!;
    expect(added.excluded).toBeNull();
    expect(added.run).toBe('scripts/lab.sh exec --name L client1 curl -s http://203.0.113.10:8080/');
    expect(added.sources).toEqual([
      `docs/lab.md:${docs[1]!.text.split('\n').findIndex((l) => l.startsWith('scripts/lab.sh exec client1 curl -s http://203.0.113.10:8080/')) + 1}`,
    ]);
    expect(runOrder(p).order).toContain(added);
    expect(p.find((e) => e.doc === 'scripts/soak.sh 60')?.excluded).toMatch(/soak/);
    // a second `scripts/lab.sh up` of the default lab is a problem with the plan, not silently run
    docs[0] = { ...docs[0]!, text: `${docs[0]!.text}\n\`\`\`sh\nscripts/lab.sh up --clients 2\n\`\`\`\n` };
    expect(runOrder(planDocs(docs, 'L', '/w')).problems).toEqual([expect.stringContaining('2 commands that bring the default lab up')]);
  });
});

describe('docs examples: the checks fail on the outputs they must refuse', () => {
  it('slbctl counters: a table of heartbeats passes; the table of dashes (no token) and the 401 message fail', () => {
    const k = checkOf('scripts/lab.sh exec controller node dist/cli/slbctl.js counters');
    expect(
      k.test(
        'KIND  NAME   HEARTBEAT  TABLES-GEN  PKTS-IN  PKTS-OUT  DROPS  FLOWS\n' +
          'mux   mux1   2s ago     1           9        0         0      0\nmux   mux2   now        1           27       6         0      1\n' +
          'host  host1  2s ago     1           0        63        0      -\nhost  host2  2s ago     1           0        60        0      -\n',
      ),
    ).toBeNull();
    expect(
      k.test(
        'KIND  NAME   HEARTBEAT  TABLES-GEN  PKTS-IN  PKTS-OUT  DROPS  FLOWS\n' +
          'mux   mux1   -          -           -        -         -      -\nmux   mux2   -          -           -        -         -      -\n' +
          'host  host1  -          -           -        -         -      -\nhost  host2  -          -           -        -         -      -\n',
      ),
    ).toMatch(/0 of 4/);
    expect(k.test('slbctl: 401: GET /v1/agents/mux/mux1/status needs the API token, and none was given\n')).toMatch(/0 of 0/);
  });

  it('backend drain --wait: applied by every agent passes; a 401 or a partial apply fails', () => {
    const k = checkOf('scripts/lab.sh exec controller node dist/cli/slbctl.js backend drain web h1vm1 --wait');
    expect(
      k.test(
        'generation 2: backend h1vm1 of pool web drained (no new flows)\ngeneration 2 (PATCH /v1/pools/web/backends/h1vm1): applied by 4/4 agents within 48 ms of the change (last mux: 40 ms; slowest: host host2)\n',
      ),
    ).toBeNull();
    expect(
      k.test(
        "slbctl: 401: PATCH /v1/pools/web/backends/h1vm1 needs the API token: Authorization: Bearer <the token in the controller's token file>\n",
      ),
    ).toMatch(/the change/);
    expect(
      k.test(
        'generation 2: backend h1vm1 of pool web drained (no new flows)\ngeneration 2 (x): applied by 3/4 agents; still waiting for host/host2\n',
      ),
    ).toMatch(/applied by all/);
  });

  it('the route checks want a path via each MUX', () => {
    const bird = checkOf('scripts/lab.sh birdc show route all 203.0.113.10/32');
    const two =
      'Table master4:\n203.0.113.10/32      unicast [mux1 12:35:18.116] * (100) [AS65001i]\n\tvia 198.18.0.11 on fab0\n\tBGP.as_path: 65001\n' +
      '                     unicast [mux2 12:35:17.437] (100) [AS65001i]\n\tvia 198.18.0.12 on fab0\n\tBGP.as_path: 65001\n';
    expect(bird.test(two)).toBeNull();
    expect(bird.test(two.split('                     unicast [mux2')[0]!)).toMatch(/mux2|two paths/);
    const ip = checkOf('scripts/lab.sh exec router ip route show 203.0.113.10');
    expect(
      ip.test(
        '203.0.113.10 proto bird metric 32 \n\tnexthop via 198.18.0.11 dev fab0 weight 1 \n\tnexthop via 198.18.0.12 dev fab0 weight 1 \n',
      ),
    ).toBeNull();
    expect(ip.test('203.0.113.10 via 198.18.0.11 dev fab0 proto bird metric 32 \n')).not.toBeNull();
  });

  it("curl to the VIP must print a backend's name; agents must all be current and connected", () => {
    const curl = checkOf('scripts/lab.sh exec client1 curl -s http://203.0.113.10/');
    expect(curl.test('h2vm1\n')).toBeNull();
    expect(curl.test('')).not.toBeNull();
    const agents = checkOf('scripts/lab.sh exec controller node dist/cli/slbctl.js agents');
    const table =
      'KIND  NAME   APPLIED  CURRENT  BEHIND  CONNECTED  LAST-SEEN  LAST-ERROR\nmux   mux1   1        1        no      yes        now        -\n' +
      'mux   mux2   1        1        no      yes        1s ago     -\nhost  host1  1        1        no      yes        now        -\nhost  host2  1        1        no      yes        now        -\n';
    expect(agents.test(table)).toBeNull();
    expect(agents.test(table.replace('host  host2  1        1        no      yes', 'host  host2  -        1        yes     no '))).toMatch(
      /host2/,
    );
  });
});
