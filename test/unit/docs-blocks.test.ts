import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  blockNeeds,
  documentationPages,
  isCommandBlock,
  type MarkdownBlock,
  markdownBlocks,
  projectRoot,
} from '../support/markdown-blocks';

// What a reader pastes must either run (test/e2e/docs-blocks.test.ts runs every command block no
// marker excuses, against a started runtime) or say what it needs. These checks need no runtime.

const parsed = documentationPages.map((page) => markdownBlocks(page));
const blocks = parsed.flatMap((p) => p.blocks);
const where = (b: Pick<MarkdownBlock, 'page' | 'line'>) => `${b.page}:${b.line}`;
const text = (page: string) => readFileSync(join(projectRoot, page), 'utf8');

describe('the command blocks of README.md and docs/', () => {
  it('give every fence a language, so a command block cannot pass for an illustration', () => {
    const allowed = new Set(['bash', 'text', 'json', 'ts']);
    expect(blocks.filter((b) => !allowed.has(b.lang)).map((b) => `${where(b)} "${b.lang}"`)).toEqual([]);
  });

  it('mark blocks only with a known need, and only right before a command block', () => {
    const bad = blocks
      .filter((b) => b.needs !== undefined)
      .filter((b) => !isCommandBlock(b) || !(blockNeeds as readonly string[]).includes(b.needs as string))
      .map((b) => `${where(b)} needs: ${b.needs}`);
    expect(bad).toEqual([]);
    expect(parsed.flatMap((p) => p.strayMarkers).map(where)).toEqual([]);
  });

  it('are all valid bash, the marked ones included', () => {
    const invalid: string[] = [];
    for (const b of blocks.filter(isCommandBlock)) {
      try {
        execFileSync('bash', ['-n'], { input: b.body, stdio: ['pipe', 'ignore', 'pipe'] });
      } catch (err) {
        invalid.push(`${where(b)}: ${String((err as { stderr?: Buffer }).stderr ?? err)}`);
      }
    }
    expect(invalid).toEqual([]);
  });

  it('leave most of them to run: only AWS, Docker and the set-up excuse a block', () => {
    const commands = blocks.filter(isCommandBlock);
    const run = commands.filter((b) => b.needs === undefined);
    // The Quick start's and the Operate guide's blocks run; marking everything would pass the rest.
    expect(run.map((b) => b.page)).toEqual(expect.arrayContaining(['README.md', 'docs/operations.md']));
    // A block with an AWS call is marked as needing AWS.
    const unmarkedAws = run.filter((b) =>
      /(^|[\s;|&(])(aws |npx cdk (deploy|bootstrap|destroy))|--stack\b/m.test(b.body),
    );
    expect(unmarkedAws.map(where)).toEqual([]);
  });
});

describe('the deploy path as a user meets it', () => {
  const readme = text('README.md');
  const deploy = blocks.filter((b) => b.page === 'README.md' && b.section === 'Deploy' && isCommandBlock(b));

  it('names every prerequisite: credentials, a region, the AWS CLI v2 where it is used', () => {
    const section = readme.slice(readme.indexOf('\n## Deploy\n'), readme.indexOf('\n## Operate\n'));
    expect(deploy.some((b) => /^aws /m.test(b.body))).toBe(true);
    expect(section).toMatch(/AWS CLI v2/);
    expect(section).toMatch(/AWS_REGION/);
    expect(section).toMatch(/credentials/);
  });

  it("attaches the operator's policy before a command that needs it, to placeholders the user fills in", () => {
    const script = deploy.map((b) => b.body).join('\n');
    const attachOperator = script.search(/OperatorPolicyArn/);
    const firstOpsCall = script.search(/pipeline --stack \S+ status/);
    expect(attachOperator).toBeGreaterThan(-1);
    expect(firstOpsCall).toBeGreaterThan(attachOperator);
    // The stack makes no role: a role name in a command is one the user must supply.
    expect(script).not.toMatch(/content-reviewer/);
    const roles = [...script.matchAll(/--(?:role|user|group)-name\s+(\S+)/g)].map((m) => m[1] as string);
    expect(roles.length).toBeGreaterThan(0);
    for (const role of roles) expect(role).toMatch(/^"?\$?[A-Z][A-Z_]*"?$/);
    expect(readme).toMatch(/placeholder/i);
  });

  it('names no issue numbers or internal history on any page', () => {
    const found = documentationPages.flatMap((page) =>
      text(page)
        .split('\n')
        .map((line, i) => ({ line, at: `${page}:${i + 1}` }))
        .filter(({ line }) => /\bissues? #?\d+|\bissue \d+'s\b|\bstop \d+\b/i.test(line))
        .map(({ at, line }) => `${at}: ${line.trim().slice(0, 100)}`),
    );
    expect(found).toEqual([]);
  });

  it('says in the README that PORT moves the port, for npm start and the CLI (or --url)', () => {
    const quickStart = readme.slice(readme.indexOf('\n## Quick start\n'), readme.indexOf('\n## Deploy\n'));
    expect(quickStart).toMatch(/PORT=\d+ npm start/);
    expect(quickStart).toMatch(/--url/);
  });
});
