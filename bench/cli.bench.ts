/**
 * `npm run bench:cli [-- --rounds N] [-- --json] [-- --docs]`: how long the CLI takes to answer as
 * the README has a user type it, against how long Node takes to start and do nothing. Each command
 * is started by name through PATH, as a shell starts it: `pipeline` from the clone's `bin/` (the
 * README's `export PATH="$PWD/bin:$PATH"`), `npx pipeline` from the clone's root. Each round
 * runs, one after the other (in alternation, so a busy spell of the machine weighs on all alike):
 * `node -e 0`, `pipeline --help`, `pipeline status` and `npx pipeline status`, both against a
 * local runtime this script starts (embedded PostgreSQL, dynalite, the local bus) and names by
 * PORT. Reported: the median of N rounds (default 10) of each, and each ratio to `node -e 0`
 * (goals for `pipeline` on PATH: --help within 2.5 times, status within 3 times). `--docs`
 * writes the result to bench/results/cli.json and its table into docs/operations.md. A
 * benchmark, not a test: nothing asserts.
 */
// First: the runtime's SDK clients must find the Node-version notice switched off.
import '../infra/local/quiet-sdk-warning';
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { cpus } from 'node:os';
import { delimiter } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRuntime } from '../infra/local/runtime';
import { tempDataDir } from '../test/support/pipeline-client';
import { isMain, numberArg, progress, writeBenchDocs } from './support/cli';
import { type CliBenchResult, cliMarkdown } from './support/cli-report';
import { median, round } from './support/stats';

const root = fileURLToPath(new URL('..', import.meta.url));
const bin = fileURLToPath(new URL('../bin', import.meta.url));

/**
 * The environment of a user's shell in the clone after `export PATH="$PWD/bin:$PATH"`: without
 * what `npm run` adds (its npm_* settings, which npx would read, and node_modules/.bin on PATH).
 */
function shellEnv(port: string): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('npm_') && k !== 'INIT_CWD'),
  );
  const path = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => dir !== '' && !/node_modules[\\/](\.bin|@npmcli)/.test(dir));
  return { ...env, PATH: [bin, ...path].join(delimiter), PORT: port, NO_COLOR: '1' };
}

/** Wall time of one command, found by name on the environment's PATH, from spawn to exit; a failed run fails the bench. */
function timeRun(command: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [file, ...args] = command as [string, ...string[]];
  const started = performance.now();
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd: root, env }, (error, _out, stderr) => {
      if (error) reject(new Error(`${command.join(' ')} failed: ${stderr}`, { cause: error }));
      else resolve(performance.now() - started);
    });
  });
}

/** Runs the four commands `rounds` times in alternation against a runtime it starts and stops. */
export async function measureCli(rounds: number): Promise<CliBenchResult> {
  const dir = tempDataDir('bench-cli-');
  progress('cli: starting a local runtime');
  const runtime = await startRuntime({ dataDir: dir, port: 0 });
  try {
    const env = shellEnv(new URL(runtime.url).port);
    const commands = {
      node: ['node', '-e', '0'],
      help: ['pipeline', '--help'],
      status: ['pipeline', 'status'],
      npxStatus: ['npx', 'pipeline', 'status'],
    };
    // Once unmeasured: builds the CLI if a source changed, warms the file cache, npx and the server.
    for (const command of Object.values(commands)) await timeRun(command, env);
    const samples = {
      node: [] as number[],
      help: [] as number[],
      status: [] as number[],
      npxStatus: [] as number[],
    };
    for (let r = 1; r <= rounds; r++) {
      progress(`cli: round ${r}/${rounds}`);
      for (const [name, command] of Object.entries(commands)) {
        samples[name as keyof typeof samples].push(await timeRun(command, env));
      }
    }
    const nodeMs = median(samples.node);
    const helpMs = median(samples.help);
    const statusMs = median(samples.status);
    const npxStatusMs = median(samples.npxStatus);
    return {
      rounds,
      nodeMs: round(nodeMs),
      helpMs: round(helpMs),
      statusMs: round(statusMs),
      npxStatusMs: round(npxStatusMs),
      helpRatio: round(helpMs / nodeMs, 2),
      statusRatio: round(statusMs / nodeMs, 2),
      npxStatusRatio: round(npxStatusMs / nodeMs, 2),
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
