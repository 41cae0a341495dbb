import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

// Issue 19: the core (outbox, relay, inbox, the consumer kit, db, http) names nothing of the
// content application (its tasks, their approval, rejection and withdrawal, its `content.*`
// events), so a fork that keeps the pipeline and changes the application leaves it alone. The
// database's schema is the application's: its migrations and the roles they grant (roles.ts)
// create the tasks table beside the outbox, so they are not held to it. Comments may say what
// calls the core; code and its strings may not.

const root = join(import.meta.dirname, '../..');
const coreDirs = ['shared/outbox', 'shared/inbox', 'shared/consumers', 'shared/http', 'shared/db'];
const schema = (file: string) => file.startsWith('shared/db/migrations/') || file === 'shared/db/roles.ts';
// A rejection is `content.rejected`, `rejectTask`, `rejectReason`: `reject` alone is a promise's word.
const contentName = /task|content\.|approv|withdraw/i;

function coreFiles(): string[] {
  return coreDirs.flatMap((dir) =>
    readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => relative(root, join(e.parentPath, e.name))),
  );
}

/** The code of a file with its comments blanked (a `//` after a colon is a URL, not a comment). */
function codeOf(text: string): string {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, ' '))
    .replace(/(^|[^:])\/\/.*$/gm, '$1');
}

/** Each line of `text`'s code that names the content application, as `file:line: code`. */
function namings(file: string, text: string): string[] {
  return codeOf(text)
    .split('\n')
    .flatMap((line, i) => (contentName.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : []));
}

describe('the core', () => {
  it('finds its files and would see a content name in their code, not in their comments', () => {
    const files = coreFiles();
    expect(files).toContain('shared/inbox/inbox-store.ts');
    expect(files).toContain('shared/consumers/delivery.ts');
    expect(files).toContain('shared/outbox/relay.ts');
    expect(namings('x.ts', 'const subject = event.data.taskId;')).toHaveLength(1);
    expect(namings('x.ts', "publish('content.approved');")).toHaveLength(1);
    expect(
      namings('x.ts', '/** what the tasks API writes */\n// an approval\nconst url = "https://x";'),
    ).toEqual([]);
    // A promise's own word is not the application's.
    expect(namings('x.ts', "if (s.status === 'rejected') return Promise.reject(err);")).toEqual([]);
  });

  it('names nothing of the content application in its code', () => {
    const found = coreFiles()
      .filter((f) => !schema(f))
      .flatMap((f) => namings(f, readFileSync(join(root, f), 'utf8')));
    expect(found).toEqual([]);
  });
});
