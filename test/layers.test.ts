// The layers the README describes, checked on the imports of every source file: static `import ... from`,
// `import '...'`, `export ... from`, `import type` and dynamic `import('...')`, found in the syntax tree
// TypeScript's own parser builds (not by a regex of ours).
//
// - shared/ is pure: it imports only shared/ and the two parsing packages yaml and ip-address; no Node
//   built-in at all (no node:fs, net, dgram, child_process, timers, crypto...), no addon (cap,
//   raw-socket); nor does it touch the globals of a process (process., timers, console).
// - runtime/ (the daemons' adapters to the system) imports shared/ and itself, Node and packages.
// - mux/ and host-agent/ never import each other, cli/ or controller/; controller/ never imports a daemon
//   (mux/, host-agent/) nor cli/; no program below scripts/ and test/ imports them.
// - scripts/oracle/ (the independent reference the tests compare the code with) imports nothing of the
//   repo but itself and types (`import type`: erased by the compiler, so no code under test runs).
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE_DIRS = ['shared', 'runtime', 'mux', 'host-agent', 'controller', 'cli', 'scripts'];
const SHARED_PACKAGES = new Set(['yaml', 'ip-address']);
/** Globals of a running process that a pure module must not touch. */
const IMPURE_GLOBAL = /\b(process\.|setTimeout\(|setInterval\(|setImmediate\(|console\.)/;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    const rel = `${dir}/${name}`;
    if (statSync(join(ROOT, rel)).isDirectory()) out.push(...sourceFiles(rel));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(rel);
  }
  return out;
}

interface Import {
  spec: string;
  typeOnly: boolean;
}

/** Every module a file names: imports, re-exports, dynamic imports, require; `typeOnly` for `import type`. */
function importsOf(text: string): Import[] {
  const out: Import[] = [];
  const visit = (n: ts.Node): void => {
    if (
      (ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) &&
      n.moduleSpecifier !== undefined &&
      ts.isStringLiteral(n.moduleSpecifier)
    ) {
      const typeOnly = ts.isImportDeclaration(n) ? n.importClause?.isTypeOnly === true : n.isTypeOnly;
      out.push({ spec: n.moduleSpecifier.text, typeOnly });
    } else if (
      ts.isCallExpression(n) &&
      (n.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(n.expression) && n.expression.text === 'require'))
    ) {
      const a = n.arguments[0];
      if (a !== undefined && ts.isStringLiteralLike(a)) out.push({ spec: a.text, typeOnly: false });
    } else if (
      ts.isImportEqualsDeclaration(n) &&
      ts.isExternalModuleReference(n.moduleReference) &&
      ts.isStringLiteral(n.moduleReference.expression)
    ) {
      out.push({ spec: n.moduleReference.expression.text, typeOnly: n.isTypeOnly });
    }
    ts.forEachChild(n, visit);
  };
  visit(ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS));
  return out;
}

/** The repo path (without extension) a relative specifier points at, or null for a package or built-in. */
function target(from: string, spec: string): string | null {
  if (!spec.startsWith('.')) return null;
  return relative(ROOT, resolve(ROOT, dirname(from), spec)).replace(/\.(js|ts)$/, '');
}

function layerOf(path: string): string {
  if (path.startsWith('scripts/oracle/')) return 'scripts/oracle';
  return path.split('/')[0]!;
}

const FORBIDDEN: Record<string, readonly string[]> = {
  shared: ['runtime', 'mux', 'host-agent', 'controller', 'cli', 'scripts', 'test'],
  runtime: ['mux', 'host-agent', 'controller', 'cli', 'scripts', 'test'],
  mux: ['host-agent', 'controller', 'cli', 'scripts', 'test'],
  'host-agent': ['mux', 'controller', 'cli', 'scripts', 'test'],
  controller: ['mux', 'host-agent', 'cli', 'scripts', 'test'],
  cli: ['scripts', 'test'],
};

/** What is wrong with one file's imports, one line each ("FILE imports SPEC: why"). */
function layerViolations(file: string, text: string): string[] {
  const from = layerOf(file);
  const out: string[] = [];
  for (const { spec, typeOnly } of importsOf(text)) {
    const to = target(file, spec);
    const bad = (why: string) => out.push(`${file} imports ${spec}: ${why}`);
    if (to === null) {
      if (from === 'shared' && !SHARED_PACKAGES.has(spec)) bad(`shared/ is pure: only shared/ and ${[...SHARED_PACKAGES].join(', ')}`);
      if (from === 'scripts/oracle' && !spec.startsWith('node:')) bad('the oracle imports nothing but Node built-ins');
      continue;
    }
    if (to.startsWith('..')) {
      bad('outside the repository');
      continue;
    }
    const toLayer = layerOf(to);
    if (from === 'scripts/oracle' && toLayer !== 'scripts/oracle' && !typeOnly) bad('the oracle imports nothing of the repository');
    else if ((FORBIDDEN[from] ?? []).includes(toLayer)) bad(`${from}/ never imports ${toLayer}/`);
  }
  if (from === 'shared') {
    const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
    const m = IMPURE_GLOBAL.exec(code);
    if (m !== null) out.push(`${file} uses ${m[1]}: shared/ is pure (no process, timers or logging)`);
  }
  return out;
}

describe('layers', () => {
  const files = SOURCE_DIRS.flatMap(sourceFiles);

  it('finds the source files and their imports', () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files).toContain('shared/args.ts');
    expect(files).toContain('runtime/command.ts');
    // one of each kind of import the pre-processor must see
    expect(
      importsOf(
        "import { a } from './a.js';\nimport type { B } from '../b.js';\nexport { c } from './c.js';\nimport './d.js';\nconst e = await import('./e.js');\nconst f = require('./f.js');",
      ),
    ).toEqual(
      [
        ['./a.js', false],
        ['../b.js', true],
        ['./c.js', false],
        ['./d.js', false],
        ['./e.js', false],
        ['./f.js', false],
      ].map(([spec, typeOnly]) => ({ spec, typeOnly })),
    );
  });

  it('no file imports across a forbidden direction', () => {
    const violations = files.flatMap((f) => layerViolations(f, readFileSync(join(ROOT, f), 'utf8')));
    expect(violations).toEqual([]);
  });

  // the rules themselves: each planted import below is refused, with its reason
  it.each([
    ['shared/addr.ts', "import { logInfo } from '../runtime/log.js';", 'shared/ never imports runtime/'],
    ['shared/addr.ts', "import { readFileSync } from 'node:fs';", 'shared/ is pure'],
    ['shared/addr.ts', "import { Cap } from 'cap';", 'shared/ is pure'],
    ['shared/addr.ts', 'const t = setTimeout(() => 0, 1);', 'shared/ is pure (no process'],
    ['runtime/log.ts', "import { MuxDaemon } from '../mux/daemon.js';", 'runtime/ never imports mux/'],
    ['runtime/log.ts', "export { main } from '../cli/replay.js';", 'runtime/ never imports cli/'],
    ['mux/daemon.ts', "import type { HostDaemon } from '../host-agent/daemon.js';", 'mux/ never imports host-agent/'],
    ['mux/main.ts', "const m = await import('../cli/replay.js');", 'mux/ never imports cli/'],
    ['host-agent/daemon.ts', "import { compileMuxTables } from '../mux/tables.js';", 'host-agent/ never imports mux/'],
    ['host-agent/main.ts', "import { main } from '../controller/main.js';", 'host-agent/ never imports controller/'],
    ['controller/api.ts', "import { MuxDaemon } from '../mux/daemon.js';", 'controller/ never imports mux/'],
    ['controller/api.ts', "import { HostDaemon } from '../host-agent/daemon.js';", 'controller/ never imports host-agent/'],
    ['controller/main.ts', "import { runSlbctl } from '../cli/slbctl.js';", 'controller/ never imports cli/'],
    ['cli/replay.ts', "import { plan } from '../scripts/lab/plan.js';", 'cli/ never imports scripts/'],
    [
      'scripts/oracle/maglev-oracle.ts',
      "import { flowHash } from '../../shared/flow-hash.js';",
      'the oracle imports nothing of the repository',
    ],
    ['scripts/oracle/maglev-oracle.ts', "import YAML from 'yaml';", 'the oracle imports nothing but Node built-ins'],
  ])('%s: %s is refused', (file, line, why) => {
    const v = layerViolations(file, `${line}\n`);
    expect(v).toHaveLength(1);
    expect(v[0]).toContain(why);
  });

  it.each([
    ['shared/addr.ts', "import { parseAllDocuments } from 'yaml';"],
    ['shared/config.ts', "import { ip } from './addr.js';"],
    ['runtime/log.ts', "import { writeFileSync } from 'node:fs';\nimport { one } from '../shared/args.js';"],
    ['mux/main.ts', "import { runCommandAsync } from '../runtime/command.js';"],
    ['cli/replay.ts', "import { newMuxContext } from '../mux/context.js';"],
    ['scripts/oracle/expected-backend.ts', "import type { SlbxConfig } from '../../shared/config.js';"],
    ['scripts/oracle/expected-backend.ts', "import { oracleTable } from './maglev-oracle.js';\nimport { createHash } from 'node:crypto';"],
  ])('%s: %s is allowed', (file, line) => {
    expect(layerViolations(file, `${line}\n`)).toEqual([]);
  });
});
