import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type CliBenchResult, cliGoals, cliMarkdown } from '../../bench/support/cli-report';

// What `npm run bench:cli` writes into docs/operations.md: each command as the README has a user
// type it (`pipeline` found on PATH, `npx pipeline` beside it), each against `node -e 0`.

const result: CliBenchResult = {
  rounds: 10,
  nodeMs: 50,
  helpMs: 110,
  statusMs: 160,
  npxStatusMs: 900,
  helpRatio: 2.2,
  statusRatio: 3.2,
  npxStatusRatio: 18,
  machine: 'Node 20.20.2, 2 cores',
};

const committed = JSON.parse(
  readFileSync(new URL('../../bench/results/cli.json', import.meta.url), 'utf8'),
) as Record<string, unknown>;

describe('the bench:cli report', () => {
  it('has a row per command as a user types it: its median, its ratio to node -e 0, its goal', () => {
    const rows = cliMarkdown(result)
      .split('\n')
      .filter((l) => l.startsWith('| `'));

    expect(rows).toEqual([
      '| `node -e 0` | 50 ms | 1 | |',
      `| \`pipeline --help\` | 110 ms | 2.2 | ${cliGoals.help} |`,
      `| \`pipeline status\` (local runtime) | 160 ms | 3.2 | ${cliGoals.status} |`,
      '| `npx pipeline status` (local runtime) | 900 ms | 18 | |',
    ]);
  });

  it('says how the commands were started: by name through PATH, npx from the clone', () => {
    const intro = cliMarkdown(result).split('\n\n')[0]?.replace(/\s+/g, ' ');

    expect(intro).toContain('medians of 10 runs in alternation, Node 20.20.2, 2 cores');
    expect(intro).toContain('`export PATH="$PWD/bin:$PATH"`');
    expect(intro).toContain('`npx pipeline` from the clone');
  });

  it('the committed bench/results/cli.json carries every figure the report shows', () => {
    expect(Object.keys(committed).sort()).toEqual(Object.keys(result).sort());
    for (const [key, value] of Object.entries(committed)) {
      expect(typeof value, key).toBe(typeof result[key as keyof CliBenchResult]);
    }
  });
});
