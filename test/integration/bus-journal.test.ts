import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { BusEvent, BusTarget } from '../../infra/local/bus/bus-types';
import { BusJournal, type JournalFile } from '../../infra/local/bus/journal';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function journalPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'bus-journal-'));
  dirs.push(dir);
  return join(dir, 'journal.jsonl');
}

const event = (id: string): BusEvent => ({
  version: '0',
  id,
  'detail-type': 'content.approved',
  source: 'test',
  account: '000000000000',
  time: new Date(0).toISOString(),
  region: 'us-east-1',
  resources: [],
  detail: {},
});
const index: BusTarget = { rule: 'r', consumer: 'index' };
const targets: BusTarget[] = [index, { rule: 'r', consumer: 'notify' }];
const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { t: string; event?: BusEvent; id?: string; consumer?: string });

describe('BusJournal', () => {
  it('an event is in the file when its record resolves, and records made meanwhile keep their order', async () => {
    const path = journalPath();
    const journal = new BusJournal(path);
    journal.recover();
    await journal.openForAppend();
    const onDisk: boolean[] = [];
    const records: Promise<void>[] = [];
    // Fifty PutEvents calls at once, with deliveries finishing in between (as under load).
    for (let i = 0; i < 50; i++) {
      const id = `e${i}`;
      records.push(
        journal
          .recordEvents([{ event: event(id), targets }])
          .then(() => void onDisk.push(lines(path).some((l) => l.event?.id === id))),
      );
      if (i > 0) journal.recordDone({ event: event(`e${i - 1}`), ...index, firstAttemptAt: 0 });
    }
    await Promise.all(records);
    await journal.close();

    expect(onDisk).toEqual(Array(50).fill(true));
    const written = lines(path).map((l) => (l.t === 'event' ? `event ${l.event?.id}` : `done ${l.id}`));
    const expected: string[] = [];
    for (let i = 0; i < 50; i++) {
      expected.push(`event e${i}`);
      if (i > 0) expected.push(`done e${i - 1}`);
    }
    expect(written).toEqual(expected);
    // What the next start finds pending: every notify target, and index of the last event only.
    const pending = new BusJournal(path).recover().map((d) => `${d.consumer} ${d.event.id}`);
    expect(pending).toHaveLength(51);
    expect(pending).toContain('index e49');
    expect(pending).not.toContain('index e48');
  });

  it('once closed, refuses an event (its EventId must not be answered) and drops a done line', async () => {
    const path = journalPath();
    const journal = new BusJournal(path);
    journal.recover();
    await journal.openForAppend();
    const last = journal.recordEvents([{ event: event('kept'), targets }]);
    await journal.close();
    await last;

    await expect(journal.recordEvents([{ event: event('late'), targets }])).rejects.toThrow(/closed/);
    journal.recordDone({ event: event('kept'), ...index, firstAttemptAt: 0 });
    expect(lines(path).map((l) => l.event?.id ?? l.id)).toEqual(['kept']);
  });

  it('after a failed write it refuses every event: none is answered onto a torn line and lost', async () => {
    const path = journalPath();
    // A disk that fills up in the middle of the first write: part of it lands, then ENOSPC.
    let full = true;
    const journal = new BusJournal(path, undefined, async (p): Promise<JournalFile> => {
      const file = await open(p, 'a');
      return {
        appendFile: async (text) => {
          if (!full) return file.appendFile(text);
          full = false;
          await file.appendFile(String(text).slice(0, 40));
          throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
        },
        sync: () => file.sync(),
        close: () => file.close(),
      };
    });
    journal.recover();
    await journal.openForAppend();

    await expect(journal.recordEvents([{ event: event('torn'), targets }])).rejects.toThrow(/ENOSPC/);
    // Before: this one was written after the torn fragment and answered; recovery then skipped
    // the glued line, and an event the relay had marked delivered was gone.
    await expect(journal.recordEvents([{ event: event('next'), targets }])).rejects.toThrow(
      /takes no more events until a restart/,
    );
    await journal.close();
    expect(new BusJournal(path).recover()).toEqual([]);
  });
});
