import { describe, expect, it } from 'vitest';
import { cliCommands, commandUsage, runCli, usage } from '../../infra/local/cli';

// `--help` is generated from the command table: these check it both ways, so a command or an
// option cannot be added to one and missed in the other.

const taskId = '3f1c2b7e-8d4a-4c1e-9b0a-5e6f7a8b9c0d';
const optionsIn = (text: string) => [...text.matchAll(/--([a-z][a-z-]*)/g)].map((m) => m[1] as string);

/** Runs the CLI against a server that answers every request with `{}`; returns the exit status and stderr. */
async function run(argv: string[]) {
  let stderr = '';
  const code = await runCli(argv, {
    fetch: async () => new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } }),
    env: {},
    stdout: { write: () => true },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { code, stderr };
}

describe('--help and the command table', () => {
  const commandSection = usage.slice(usage.indexOf('Commands:'), usage.indexOf('Options:'));
  const optionSection = usage.slice(
    usage.indexOf('Options:'),
    usage.indexOf('\n\n', usage.indexOf('Options:')),
  );

  it.each(cliCommands.map((c) => [c.words.join(' '), c] as const))(
    'lists %s with every option it takes',
    (_, command) => {
      const line = commandUsage(command as Parameters<typeof commandUsage>[0]);
      expect(commandSection).toContain(`  ${line}`);
      expect(optionsIn(line).sort()).toEqual([...command.options].sort());
    },
  );

  it('lists no command the table does not have', () => {
    const listed = commandSection
      .split('\n')
      .filter((l) => /^ {2}[a-z]/.test(l))
      .map((l) => l.trim());
    expect(listed).toHaveLength(cliCommands.length);
    const lines = cliCommands.map((c) => commandUsage(c as Parameters<typeof commandUsage>[0]));
    for (const l of listed) expect(lines.some((line) => l.startsWith(line))).toBe(true);
  });

  it('accepts every option it shows, on the command it shows it for', async () => {
    for (const command of cliCommands) {
      const positionals = command.positionals.map(() => taskId);
      for (const option of optionsIn(commandUsage(command as Parameters<typeof commandUsage>[0]))) {
        const value = option === 'all' ? [] : [option === 'consumer' ? 'index' : 'x'];
        const required = (command.required ?? [])
          .filter((r) => r !== option)
          .flatMap((r) => [`--${r}`, r === 'consumer' ? 'index' : 'x']);
        const r = await run([...command.words, ...positionals, `--${option}`, ...value, ...required]);
        expect(r.stderr).not.toMatch(/Unknown option|does not take/);
      }
    }
  });

  it('accepts every global option it shows, with any command', async () => {
    const globals = optionsIn(optionSection);
    expect(globals.sort()).toEqual(['help', 'json', 'stack', 'url']);
    for (const option of ['json', 'url']) {
      const r = await run(['status', `--${option}`, ...(option === 'url' ? ['http://127.0.0.1:1'] : [])]);
      expect(r.stderr).not.toMatch(/Unknown option|does not take/);
    }
  });
});
