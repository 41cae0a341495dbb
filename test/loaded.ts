/**
 * `npm run test:loaded`: the whole suite (`npm test`) with CPU-burning processes beside it, twice
 * as many as the machine has cores, as a CI runner busy with other work would be. A test that
 * passes quietly and fails here bets on the machine's speed (a sleep, a lease or a timeout too
 * close to what the work takes): the suite must pass both ways.
 *
 * Arguments go to vitest (`npm run test:loaded -- test/integration/relay.test.ts` loads one
 * file); `LOADED_BURNERS` sets the number of burners. Prints the burners, the load average and
 * the suite's wall time on stderr, and exits with the suite's exit code.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';

const cores = availableParallelism();
const burners = Number.parseInt(process.env.LOADED_BURNERS ?? '', 10) || 2 * cores;
const suiteArgs = process.argv.slice(2);

const say = (line: string) => process.stderr.write(`[test:loaded] ${line}\n`);
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

// Each burner is a process of its own spinning one core; the scheduler shares the cores among
// them and the suite's workers, PostgreSQL and the DynamoDB engines alike.
const burning: ChildProcess[] = Array.from({ length: burners }, () =>
  spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
);
const stopBurners = () => {
  for (const b of burning) if (b.exitCode === null && b.signalCode === null) b.kill('SIGKILL');
};
process.on('exit', stopBurners);
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    stopBurners();
    process.exit(130);
  });

say(`${burners} CPU burners on ${cores} cores; load average ${load()}`);
const started = performance.now();
const suite = spawn('npm', ['test', ...(suiteArgs.length > 0 ? ['--', ...suiteArgs] : [])], {
  stdio: 'inherit',
});
const code = await new Promise<number>((resolve) => {
  suite.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 1 : 0)));
  suite.on('error', (err) => {
    say(`the suite did not start: ${err.message}`);
    resolve(1);
  });
});
const seconds = (performance.now() - started) / 1_000;
const loadAtEnd = load();
stopBurners();
say(
  `${code === 0 ? 'PASSED' : `FAILED (exit ${code})`} in ${seconds.toFixed(0)} s wall time, ` +
    `beside ${burners} burners on ${cores} cores; load average at the end ${loadAtEnd}`,
);
process.exitCode = code;
