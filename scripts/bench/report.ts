// The bench reports (see report-lib.ts):
//   node dist/scripts/bench/report.js e2e --dir DIR     end-to-end phases of send-paths.sh -> DIR/e2e.json
//   node dist/scripts/bench/report.js bench --dir DIR   the whole bench -> results.json, results.md, chart.svg
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { benchReport, e2eMarkdown, summarizeE2e } from './report-lib.js';

function usage(msg: string): never {
  process.stderr.write(
    `report.js: ${msg}\nusage: node dist/scripts/bench/report.js e2e --dir DIR\n       node dist/scripts/bench/report.js bench --dir DIR\n`,
  );
  process.exit(2);
}

const [cmd, ...rest] = process.argv.slice(2);
const dirArg = (): string => {
  if (rest[0] !== '--dir' || rest[1] === undefined) usage('--dir DIR is required');
  return rest[1];
};
if (cmd === 'e2e') {
  const dir = dirArg();
  const e = summarizeE2e(dir);
  writeFileSync(join(dir, 'e2e.json'), `${JSON.stringify(e, null, 2)}\n`);
  process.stdout.write(`${e2eMarkdown(e)}\n`);
} else if (cmd === 'bench') {
  benchReport(dirArg());
} else {
  usage(cmd === undefined ? 'a command is required' : `unknown command ${JSON.stringify(cmd)}`);
}
