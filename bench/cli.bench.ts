/**
 * `npm run bench:cli [-- --rounds N] [-- --json] [-- --docs]`: how long `npx pipeline` takes to
 * answer, against how long Node takes to start and do nothing. Each round runs, one after the
 * other (in alternation, so a busy spell of the machine weighs on all three alike):
 * `node -e 0`, `node bin/pipeline.mjs --help`, and `node bin/pipeline.mjs status` against a local
 * runtime this script starts (embedded PostgreSQL, dynalite, the local bus). Reported: the median
 * of N rounds (default 10) of each, and the two ratios to `node -e 0` (goals: --help within 2.5
 * times, status within 3 times). `--docs` writes the result to bench/results/cli.json and its
 * table into docs/operations.md. A benchmark, not a test: nothing asserts.
 */
// First: the runtime's SDK clients must find the Node-version notice switched off.
import '../infra/local/quiet-sdk-warning';
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { startRuntime } from '../infra/local/runtime';
import { tempDataDir } from '../test/support/pipeline-client';
import { isMain, numberArg, progress, writeBenchDocs } from './support/cli';
import { type CliBenchResult, cliMarkdown } from './support/cli-report';
import { median, round } from './support/stats';

const bin = fileURLToPath(new URL('../bin/pipeline.mjs', import.meta.url));

/** Wall time of one process from spawn to exit; a failed run fails the bench. */
function timeRun(args: readonly string[]): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [...args],
      { env: { ...process.env, NO_COLOR: '1' } },
      (error, _out, stderr) => {
        if (error) reject(new Error(`${args.join(' ')} failed: ${stderr}`, { cause: error }));
        else resolve(performance.now() - started);
      },
    );
  });
}

/** Runs the three commands `rounds` times in alternation against a runtime it starts and stops. */
export async function measureCli(rounds: number): Promise<CliBenchResult> {
  const dir = tempDataDir('bench-cli-');
  progress('cli: starting a local runtime');
  const runtime = await startRuntime({ dataDir: dir, port: 0 });
  try {
    const commands = {
      node: ['-e', '0'],
      help: [bin, '--help'],
      status: [bin, '--url', runtime.url, 'status'],
    };
    // Once unmeasured: builds the CLI if a source changed, warms the file cache and the server.
    for (const args of Object.values(commands)) await timeRun(args);
    const samples = { node: [] as number[], help: [] as number[], status: [] as number[] };
    for (let r = 1; r <= rounds; r++) {
      progress(`cli: round ${r}/${rounds}`);
      for (const [name, args] of Object.entries(commands)) {
        samples[name as keyof typeof samples].push(await timeRun(args));
      }
    }
    const nodeMs = median(samples.node);
    const helpMs = median(samples.help);
    const statusMs = median(samples.status);
    return {
      rounds,
      nodeMs: round(nodeMs),
      helpMs: round(helpMs),
      statusMs: round(statusMs),
      helpRatio: round(helpMs / nodeMs, 2),
      statusRatio: round(statusMs / nodeMs, 2),
      machine: `Node ${process.versions.node}, ${cpus().length} cores`,
    };
  } finally {
    await runtime.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) {
  const args = process.argv.slice(2);
  const result = await measureCli(numberArg(args, '--rounds', 10));
  if (args.includes('--json')) process.stdout.write(`${JSON.stringify(result)}\n`);
  else process.stdout.write(`${cliMarkdown(result)}\n`);
  if (args.includes('--docs')) {
    writeBenchDocs('cli.json', result, 'docs/operations.md', 'cli', cliMarkdown(result));
  }
  process.exit(0);
}
