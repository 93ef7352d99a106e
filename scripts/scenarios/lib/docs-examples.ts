#!/usr/bin/env node
// The commands the docs show, run as a user would run them (scenario 21). Every line of every ```sh
// block of DOC_FILES is a command: it is either run, in the order the docs give, against one lab that the
// docs' own `scripts/lab.sh up` brings up and their `scripts/lab.sh down` takes down, or it is listed in
// EXCLUDED with the reason it cannot run there. A command that is neither fails the run, so an example
// added to the docs is tested the day it is written. Each run command must exit 0; where the docs say
// what it shows (the comment beside it, the prose around it), CHECKS holds the key parts of that output.
//
// The commands are rewritten only so that they act on the scenario's lab and not on someone else's:
// `scripts/lab.sh SUB` gets `--name LAB` (a `--name X` of the docs becomes `LAB-X`, a second lab, taken
// down right after its checks), `runs/lab/default/` becomes `runs/lab/LAB/`, and `/tmp/` a work folder.
//
//   node dist/scripts/scenarios/lib/docs-examples.js list [--name LAB]        the plan: each command, run or why not
//   node dist/scripts/scenarios/lib/docs-examples.js run --name LAB --work DIR runs it (as root, from the repository)
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isMain } from '../../../runtime/command.js';

/** The pages whose ```sh blocks are tested, relative to the repository root. */
export const DOC_FILES = ['README.md', 'docs/lab.md'] as const;

/** One command line of a ```sh block. */
export interface DocCommand {
  file: string;
  /** 1-based line of the command in the file. */
  line: number;
  /** The command as the docs show it, without its trailing comment. */
  text: string;
  /** The comment after it (without '#'), or ''. */
  comment: string;
}

/** Splits a shell line into the command and a trailing comment: '#' at the start of a word, outside quotes. */
export function splitComment(line: string): { text: string; comment: string } {
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quote !== null) {
      if (ch === quote) quote = null;
      else if (ch === '\\' && quote === '"') i++;
      continue;
    }
    if (ch === '\\') {
      i++;
      continue;
    }
    if (ch === "'" || ch === '"') {
      quote = ch;
      continue;
    }
    if (ch === '#' && (i === 0 || /\s/.test(line[i - 1]!))) return { text: line.slice(0, i).trim(), comment: line.slice(i + 1).trim() };
  }
  return { text: line.trim(), comment: '' };
}

const FENCE_OPEN = /^\s*```\s*(sh|bash|shell)\s*$/;
const FENCE_ANY = /^\s*```/;

/** Every command of every ```sh (or bash, shell) block of a Markdown text; a line ending in \ continues. */
export function extractCommands(markdown: string, file: string): DocCommand[] {
  const lines = markdown.split('\n');
  const out: DocCommand[] = [];
  let inSh = false;
  let inOther = false;
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    if (!inSh && !inOther) {
      if (FENCE_OPEN.test(l)) inSh = true;
      else if (FENCE_ANY.test(l)) inOther = true;
      continue;
    }
    if (FENCE_ANY.test(l)) {
      inSh = false;
      inOther = false;
      continue;
    }
    if (inOther) continue;
    const first = i + 1;
    let joined = l;
    while (/\\\s*$/.test(joined) && i + 1 < lines.length && !FENCE_ANY.test(lines[i + 1]!)) {
      joined = `${joined.replace(/\s*\\\s*$/, '')} ${lines[++i]!.trim()}`;
    }
    const { text, comment } = splitComment(joined);
    if (text === '') continue; // a blank or comment-only line
    out.push({ file, line: first, text, comment });
  }
  return out;
}

/** Splits a command into words, keeping quotes (enough for the docs' commands: no expansions). */
export function words(text: string): string[] {
  return text.match(/'[^']*'|"(?:[^"\\]|\\.)*"|\S+/g) ?? [];
}

const LAB_SUBCOMMANDS_WITH_NAME = new Set(['up', 'status', 'exec', 'birdc', 'down']);

/** `scripts/lab.sh SUB ...` as [SUB, the --name it gives or null], or null for any other command. */
export function labCommand(text: string): { sub: string; name: string | null } | null {
  const w = words(text);
  if (w[0] !== 'scripts/lab.sh' || w.length < 2) return null;
  const i = w.indexOf('--name');
  const eq = w.find((x) => x.startsWith('--name='));
  return { sub: w[1]!, name: i > 1 ? (w[i + 1] ?? null) : eq !== undefined ? eq.slice('--name='.length) : null };
}

/** The command as run against lab `lab`, with files the docs put in /tmp/ in `work`. */
export function rewriteForLab(text: string, lab: string, work: string): string {
  let t = text.replace(/runs\/lab\/default\//g, `runs/lab/${lab}/`).replace(/(^|[\s='"])\/tmp\//g, `$1${work}/`);
  const lc = labCommand(t);
  if (lc !== null && LAB_SUBCOMMANDS_WITH_NAME.has(lc.sub)) {
    const w = words(t);
    const i = w.indexOf('--name');
    const j = w.findIndex((x) => x.startsWith('--name='));
    if (i > 1 && w[i + 1] !== undefined) w[i + 1] = `${lab}-${w[i + 1]}`;
    else if (j > 1) w[j] = `--name=${lab}-${w[j]!.slice('--name='.length)}`;
    else w.splice(2, 0, '--name', lab);
    t = w.join(' ');
  }
  return t;
}

/** A command the docs show that this test does not run, and why. */
export interface Exclusion {
  pattern: RegExp;
  reason: string;
}

export const EXCLUDED: readonly Exclusion[] = [
  {
    pattern: /^scripts\/demo\.sh\b/,
    reason:
      'the demo brings up its own full lab and captures every link (a second lab beside this one); it is its own check: it verifies the path from its captures and exits non-zero otherwise',
  },
  { pattern: /^scripts\/test\.sh\b/, reason: 'the whole test suite, which runs this scenario: it would run itself' },
  {
    pattern: /^scripts\/bench\.sh --smoke\b/,
    reason: "the bench's smoke run builds its own namespaces and measures every part once (a minute); scripts/test.sh runs it",
  },
  {
    pattern: /^scripts\/bench\.sh\b/,
    reason: 'the benchmark builds its own namespaces and takes about 12 minutes (--smoke: scripts/test.sh runs it)',
  },
  {
    pattern: /^scripts\/fuzz\.sh\b/,
    reason: 'the fuzzer: 1,000,000 inputs per target, minutes; the unit suite replays its corpus and a seeded run',
  },
  { pattern: /^scripts\/soak\.sh\b/, reason: 'the soak runs 10 minutes by default (scripts/test.sh runs its 60 s version)' },
];

/** What a command's output must show, where the docs say what it shows. */
export interface Check {
  /** Which docs commands (their text as the docs show it) this applies to. */
  pattern: RegExp;
  /** What the docs promise, in words (printed on a failure). */
  what: string;
  /** Returns null when the output shows it, else what is missing. */
  test(output: string): string | null;
  /** A command to run after it (rewritten like the docs' commands, with LAB the lab it named) whose output `thenTest` checks. */
  then?: string;
  thenTest?(output: string): string | null;
}

const has = (re: RegExp, what: string) => (o: string) => (re.test(o) ? null : `no ${what} (expected ${re})`);
const all =
  (...tests: ((o: string) => string | null)[]) =>
  (o: string) => {
    for (const t of tests) {
      const r = t(o);
      if (r !== null) return r;
    }
    return null;
  };
const BACKENDS = /^(h1vm1|h1vm2|h2vm1|h2vm2)$/m;
const json = (keys: string[]) => (o: string) => {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(o) as Record<string, unknown>;
  } catch {
    return 'the output is not JSON';
  }
  const missing = keys.filter((k) => !(k in v));
  return missing.length === 0 ? null : `no ${missing.join(', ')} in the JSON`;
};

export const CHECKS: readonly Check[] = [
  { pattern: /^scripts\/lab\.sh up$/, what: 'the lab is up', test: has(/^lab '[^']+' is up\./m, '"lab ... is up"') },
  {
    pattern: /^scripts\/lab\.sh up --name \S+ --muxes 8$/,
    what: 'the same lab with mux1..mux8',
    test: has(/^lab '[^']+' is up\./m, '"lab ... is up"'),
    then: 'scripts/lab.sh status --name LAB',
    thenTest: all(has(/^ {2}mux8 /m, 'node mux8'), has(/mux8 +BGP .*Established/, "mux8's BGP session Established"), (o) =>
      /^ {2}mux9 /m.test(o) ? 'a mux9' : null,
    ),
  },
  {
    pattern: /^scripts\/lab\.sh up --name \S+ --prometheus$/,
    what: 'the lab with a Prometheus scraping every daemon (docs/metrics.md)',
    test: all(
      has(/^lab '[^']+' is up\./m, '"lab ... is up"'),
      has(/prometheus up at http:\/\/198\.18\.0\.9:9090 .*: 5 targets/, 'Prometheus with 5 targets up'),
    ),
    then: 'scripts/lab.sh status --name LAB',
    thenTest: has(/^prometheus http:\/\/198\.18\.0\.9:9090 \(pid \d+, running;/m, "Prometheus's URL, running"),
  },
  {
    pattern: /^scripts\/lab\.sh status$/,
    what: 'namespaces, addresses, routes, processes, daemon status',
    test: all(
      has(/^nodes /m, 'nodes'),
      has(/^ {2}mux1 +\S+ +fab0 198\.18\.0\.11\/24/m, 'mux1 and its address'),
      has(/nexthop via 198\.18\.0\.11 /, "the router's route via mux1"),
      has(/nexthop via 198\.18\.0\.12 /, "the router's route via mux2"),
      has(/^processes:/m, 'processes'),
    ),
  },
  {
    pattern: /^scripts\/lab\.sh exec client1 curl -s 'http:\/\/\[2001:db8:ff::10\]\/'$/,
    what: 'answered by one of h1vm1, h1vm2, h2vm1, h2vm2',
    test: has(BACKENDS, 'backend name'),
  },
  {
    pattern: /^scripts\/lab\.sh exec client1 curl -s http:\/\/203\.0\.113\.10\/$/,
    what: 'answered by one of h1vm1, h1vm2, h2vm1, h2vm2',
    test: has(BACKENDS, 'backend name'),
  },
  {
    pattern: /^scripts\/lab\.sh exec client1 node dist\/scripts\/lab\/client\.js http /,
    what: 'every request answered (the client exits 0 only then)',
    test: all(
      has(/^http \S+: (\d+) total, \1 ok, 0 failed/m, 'all requests ok'),
      has(/^ {2}backend h[12]vm[12]: \d+$/m, 'the answers per backend'),
    ),
  },
  {
    pattern: /^scripts\/lab\.sh exec client1 node dist\/scripts\/lab\/client\.js udp /,
    what: 'every flow answered',
    test: has(/^udp \S+: (\d+) total, \1 ok, 0 failed/m, 'all flows ok'),
  },
  {
    pattern: /^scripts\/lab\.sh exec mux1 tcpdump -ni fab0 -c 10$/,
    what: '10 packets',
    test: has(/^10 packets captured$/m, '"10 packets captured"'),
  },
  {
    pattern: /^scripts\/lab\.sh exec mux1 curl -s 127\.0\.0\.1:9180\/status$/,
    what: '"bgp": the session, what is announced and why',
    test: json(['ready', 'bgp', 'counters', 'pools']),
  },
  {
    pattern: /^scripts\/lab\.sh exec mux1 curl -s 127\.0\.0\.1:9180\/counters$/,
    what: 'every MUX counter',
    test: json(['rx_packets', 'tx_packets', 'drop_not_vip']),
  },
  {
    pattern: /^scripts\/lab\.sh exec host1 curl -s 127\.0\.0\.1:9181\/counters$/,
    what: 'every host agent counter',
    test: json(['in_packets', 'out_dsr', 'drop_in_not_for_us']),
  },
  {
    pattern: /^scripts\/lab\.sh birdc show protocols$/,
    what: "the router's BGP sessions, one per MUX",
    test: all(has(/^mux1 +BGP .*Established/m, 'mux1 Established'), has(/^mux2 +BGP .*Established/m, 'mux2 Established')),
  },
  {
    pattern: /^scripts\/lab\.sh birdc show route all 203\.0\.113\.10\/32$/,
    what: 'one path per MUX: AS65001i via each MUX, learned by BGP',
    test: all(
      has(/203\.0\.113\.10\/32 +unicast \[mux\d/, 'the VIP route'),
      has(/via 198\.18\.0\.11 /, 'a path via mux1'),
      has(/via 198\.18\.0\.12 /, 'a path via mux2'),
      (o) => ((o.match(/\[AS65001i\]/g) ?? []).length === 2 ? null : 'not exactly two paths [AS65001i]'),
      has(/BGP\.as_path: 65001/, 'AS path 65001'),
    ),
  },
  {
    pattern: /^scripts\/lab\.sh exec router birdc -s runs\/lab\/default\/bird\.ctl show route$/,
    what: 'the same, by hand',
    test: all(has(/203\.0\.113\.10\/32 +unicast \[mux\d/, 'the VIP route'), has(/2001:db8:ff::10\/128 +unicast/, 'the IPv6 VIP route')),
  },
  {
    pattern: /^scripts\/lab\.sh exec router ip route show 203\.0\.113\.10$/,
    what: "the kernel's ECMP route BIRD installed",
    test: all(
      has(/^203\.0\.113\.10 proto bird/m, 'a route by BIRD'),
      has(/nexthop via 198\.18\.0\.11 /, 'via mux1'),
      has(/nexthop via 198\.18\.0\.12 /, 'via mux2'),
    ),
  },
  {
    pattern: /^scripts\/lab\.sh exec controller node dist\/cli\/slbctl\.js agents$/,
    what: 'every agent at the current generation',
    test: (o) => {
      const rows = o.split('\n').filter((l) => /^(mux|host) /.test(l));
      if (rows.length !== 4) return `${rows.length} agents, not 4 (mux1, mux2, host1, host2)`;
      const behind = rows.filter((l) => !/^\S+ +\S+ +(\d+) +\1 +no +yes /.test(l));
      return behind.length === 0 ? null : `not at the current generation or not connected: ${behind.join(' | ')}`;
    },
  },
  {
    pattern: /^scripts\/lab\.sh exec controller node dist\/cli\/slbctl\.js backend drain web h1vm1 --wait$/,
    what: 'drained, and applied by every agent',
    test: all(
      has(/^generation \d+: backend h1vm1 of pool web drained/m, 'the change'),
      has(/applied by (\d+)\/\1 agents within \d+ ms/, 'applied by all agents'),
    ),
  },
  {
    pattern: /^scripts\/lab\.sh exec controller node dist\/cli\/slbctl\.js health$/,
    what: 'probe states, from the host agents',
    test: (o) => {
      const up = ['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2'].filter((n) => new RegExp(`^${n} +http80 +up +host[12] `, 'm').test(o));
      return up.length === 4 ? null : `up: ${up.join(', ') || 'none'} of h1vm1, h1vm2, h2vm1, h2vm2`;
    },
  },
  {
    pattern: /^scripts\/lab\.sh exec controller node dist\/cli\/slbctl\.js counters$/,
    what: 'per MUX and host, from their heartbeats (numbers, not dashes)',
    test: (o) => {
      const rows = o.split('\n').filter((l) => /^(mux|host) /.test(l));
      const fresh = rows.filter((l) => /^\S+ +\S+ +(now|\d+s ago) +\d+ +\d+ +\d+ +\d+ /.test(l));
      return rows.length === 4 && fresh.length === 4
        ? null
        : `rows with a heartbeat and counters: ${fresh.length} of ${rows.length} (want 4)`;
    },
  },
  {
    pattern: /^node dist\/cli\/replay\.js .*--plane mux /,
    what: 'the frames in and out',
    test: has(/^mux: (\d+) frames in, \1 out -> /m, 'every frame out'),
  },
  {
    // tshark's summary line names the innermost packet: the client's, decoded through the VXLAN header
    pattern: /^tshark -r \S+ -d udp\.port==4789,vxlan$/,
    what: 'the client packets inside the VXLAN, decoded',
    test: all(
      has(/ 198\.51\.100\.\d+ → 203\.0\.113\.10 /, 'an IPv4 client packet to the VIP'),
      has(/ 2001:db8:c::\S+ → 2001:db8:ff::10 /, 'an IPv6 client packet to the VIP'),
      (o) => (/ 198\.18\.0\.\d+ → 198\.18\.0\.\d+ /.test(o) ? 'a line with the outer addresses only: VXLAN not decoded' : null),
    ),
  },
];

export interface PlanEntry {
  /** Where the docs show it (every place, when several show the same command). */
  sources: string[];
  doc: string;
  comment: string;
  /** 'run' in the lab's order, or excluded (with the reason). */
  excluded: string | null;
  run: string;
  checks: Check[];
  lab: { sub: string; name: string | null } | null;
}

/** The commands of the docs in order, the same command once, each with its exclusion or its checks. */
export function planDocs(docs: readonly { file: string; text: string }[], lab: string, work: string): PlanEntry[] {
  const byText = new Map<string, PlanEntry>();
  const out: PlanEntry[] = [];
  for (const d of docs) {
    for (const c of extractCommands(d.text, d.file)) {
      const seen = byText.get(c.text);
      if (seen !== undefined) {
        seen.sources.push(`${c.file}:${c.line}`);
        continue;
      }
      const ex = EXCLUDED.find((e) => e.pattern.test(c.text));
      const e: PlanEntry = {
        sources: [`${c.file}:${c.line}`],
        doc: c.text,
        comment: c.comment,
        excluded: ex?.reason ?? null,
        run: rewriteForLab(c.text, lab, work),
        checks: CHECKS.filter((k) => k.pattern.test(c.text)),
        lab: labCommand(c.text),
      };
      byText.set(c.text, e);
      out.push(e);
    }
  }
  return out;
}

/** The order of the run: the lab's own `up` first, its `down` last, the rest as the docs give them. */
export function runOrder(plan: readonly PlanEntry[]): { order: PlanEntry[]; problems: string[] } {
  const problems: string[] = [];
  const ups = plan.filter((e) => e.excluded === null && e.lab?.sub === 'up' && e.lab.name === null);
  const downs = plan.filter((e) => e.excluded === null && e.lab?.sub === 'down' && e.lab.name === null);
  if (ups.length !== 1)
    problems.push(`the docs show ${ups.length} commands that bring the default lab up (scripts/lab.sh up without --name); want one`);
  if (downs.length !== 1)
    problems.push(`the docs show ${downs.length} commands that take the default lab down (scripts/lab.sh down); want one`);
  const rest = plan.filter((e) => e.excluded === null && !ups.includes(e) && !downs.includes(e));
  return { order: [...ups, ...rest, ...downs], problems };
}

/** Checks that match no command of the docs: a renamed or deleted example whose check would never run. */
export function unusedChecks(plan: readonly PlanEntry[]): Check[] {
  return CHECKS.filter((k) => !plan.some((e) => e.checks.includes(k)));
}

function readDocs(root: string): { file: string; text: string }[] {
  return DOC_FILES.map((f) => ({ file: f, text: readFileSync(join(root, f), 'utf8') }));
}

// ---------------------------------------------------------------------------------------------
// the command

const HELP = `usage: node dist/scripts/scenarios/lib/docs-examples.js list [--name LAB] [--work DIR]
       node dist/scripts/scenarios/lib/docs-examples.js run --name LAB --work DIR

Runs every command of the \`\`\`sh blocks of ${DOC_FILES.join(' and ')} (scenario 21): the docs' own
\`scripts/lab.sh up\` first (with --name LAB), their \`scripts/lab.sh down\` last, the rest in the docs'
order; a second lab a command brings up (--name X becomes LAB-X) is taken down after its checks. Each
must exit 0 and show what the docs say it shows; the commands that cannot run there are listed with the
reason. list prints that plan. As root, from the repository's root. Output of each command: WORK/NN.out.
`;

/** Per command: how long it may take before it counts as hung (not a timing assertion: a hang guard). */
const HANG_GUARD_S = (e: PlanEntry) => (e.lab?.sub === 'up' ? 600 : 180);

function runOne(cmd: string, timeoutS: number): { code: number | null; output: string; signal: string | null } {
  // the user's environment, without an API token of its own: scripts/lab.sh exec must pass the lab's
  const env = { ...process.env };
  delete env['SLBX_TOKEN_FILE'];
  const r = spawnSync('bash', ['-c', cmd], {
    encoding: 'utf8',
    env,
    timeout: timeoutS * 1000,
    maxBuffer: 64 * 1024 * 1024,
    killSignal: 'SIGTERM',
  });
  return { code: r.status, output: `${r.stdout ?? ''}${r.stderr ?? ''}`, signal: r.signal };
}

export function main(argv: readonly string[]): number {
  const verb = argv[0];
  if (verb === undefined || verb === '--help' || verb === '-h' || argv.includes('--help')) {
    process.stdout.write(HELP);
    return verb === undefined ? 2 : 0;
  }
  const opt = (n: string) => {
    const i = argv.indexOf(n);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const lab = opt('--name') ?? 'default';
  const work = resolve(opt('--work') ?? '/tmp');
  const plan = planDocs(readDocs(process.cwd()), lab, work);
  const { order, problems } = runOrder(plan);
  const unused = unusedChecks(plan);
  for (const k of unused) problems.push(`a check matches no command of the docs (was the example changed?): ${k.pattern} (${k.what})`);
  if (verb === 'list') {
    for (const e of plan) {
      process.stdout.write(`${e.excluded === null ? 'run ' : 'skip'} ${e.sources.join(', ')}: ${e.doc}\n`);
      if (e.excluded !== null) process.stdout.write(`       excluded: ${e.excluded}\n`);
      else {
        if (e.run !== e.doc) process.stdout.write(`       as: ${e.run}\n`);
        for (const k of e.checks) process.stdout.write(`       shows: ${k.what}\n`);
      }
    }
    for (const p of problems) process.stdout.write(`PROBLEM ${p}\n`);
    return problems.length === 0 ? 0 : 1;
  }
  if (verb !== 'run') {
    process.stderr.write(`docs-examples: unknown verb ${JSON.stringify(verb)}\n${HELP}`);
    return 2;
  }
  if (opt('--name') === undefined || opt('--work') === undefined) {
    process.stderr.write('docs-examples run: --name LAB and --work DIR are required\n');
    return 2;
  }
  mkdirSync(work, { recursive: true });
  for (const p of problems) process.stdout.write(`FAIL ${p}\n`);
  let failed = 0;
  const excluded = plan.filter((e) => e.excluded !== null);
  let n = 0;
  let ran = 0;
  let checked = 0;
  for (const e of order) {
    n++;
    const t0 = process.hrtime.bigint();
    const r = runOne(e.run, HANG_GUARD_S(e));
    const s = (Number(process.hrtime.bigint() - t0) / 1e9).toFixed(1);
    ran++;
    writeFileSync(join(work, `${String(n).padStart(2, '0')}.out`), `$ ${e.run}\n${r.output}`);
    const why: string[] = [];
    if (r.code !== 0) why.push(r.signal !== null ? `killed by ${r.signal} after the ${HANG_GUARD_S(e)} s hang guard` : `exit ${r.code}`);
    for (const k of e.checks) {
      const miss = k.test(r.output);
      if (miss !== null) why.push(`the docs say it shows ${k.what}: ${miss}`);
      if (k.then !== undefined && r.code === 0) {
        const thenLab = e.lab?.name === null || e.lab === null ? lab : `${lab}-${e.lab.name}`;
        const cmd = k.then.replace(/\bLAB\b/g, thenLab);
        const t = runOne(cmd, 180);
        writeFileSync(join(work, `${String(n).padStart(2, '0')}.then.out`), `$ ${cmd}\n${t.output}`);
        const m2 = t.code !== 0 ? `exit ${t.code}` : (k.thenTest?.(t.output) ?? null);
        if (m2 !== null) why.push(`then \`${cmd}\`: ${m2}`);
      }
      if (miss === null) checked++;
    }
    // a second lab the docs bring up (--name X) is taken down once checked: the docs leave it to the reader
    if (e.lab?.sub === 'up' && e.lab.name !== null) {
      const down = runOne(`scripts/lab.sh down --name ${lab}-${e.lab.name}`, 180);
      if (down.code !== 0) why.push(`taking down lab ${lab}-${e.lab.name}: exit ${down.code}`);
    }
    const where = e.sources.join(', ');
    const labDidNotComeUp = why.length > 0 && e === order[0] && e.lab?.sub === 'up';
    if (why.length === 0) process.stdout.write(`ok   ${where}: ${e.doc} (${s} s)\n`);
    else {
      failed++;
      process.stdout.write(`FAIL ${where}: ${e.doc} (${s} s)\n       ran: ${e.run}\n${why.map((w) => `       ${w}\n`).join('')}`);
      const tail = r.output
        .trimEnd()
        .split('\n')
        .slice(-12)
        .map((l) => `       | ${l}`)
        .join('\n');
      if (tail !== '') process.stdout.write(`${tail}\n`);
    }
    if (labDidNotComeUp) {
      // nothing after it can show what the docs say: one failure, not one per command
      process.stdout.write(`FAIL the lab did not come up: the other ${order.length - 1} commands were not run\n`);
      break;
    }
  }
  for (const e of excluded) process.stdout.write(`excluded ${e.sources.join(', ')}: ${e.doc}: ${e.excluded}\n`);
  process.stdout.write(
    `docs examples: ${ran} commands run from ${DOC_FILES.join(' and ')}, ${ran - failed} passed, ${failed} failed; ${checked} output checks passed; ${excluded.length} excluded (listed above)${problems.length > 0 ? `; ${problems.length} problems with the plan` : ''}; outputs in ${work}\n`,
  );
  return failed === 0 && problems.length === 0 ? 0 : 1;
}

if (isMain(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
