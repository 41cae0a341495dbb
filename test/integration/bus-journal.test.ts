import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { BusEvent, BusTarget } from '../../infra/local/bus/bus-types';
import { BusJournal, type JournalFile } from '../../infra/local/bus/journal';
import { deferred } from '../support/gates';

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
/**
 * The file's whole lines. Read while the journal is running, the file may end in a line whose
 * write is still under way (a reader of a regular file can see part of a write); recovery skips
 * such a torn tail, and so does this.
 */
const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .replace(/[^\n]*$/, '')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { t: string; event?: BusEvent; id?: string; consumer?: string });

describe('BusJournal', () => {
  it('an event is in the file when its record resolves, and records made meanwhile keep their order', async () => {
    const path = journalPath();
    const journal = new BusJournal(path);
    await journal.recover();
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
    const pending = (await new BusJournal(path).recover()).map((d) => `${d.consumer} ${d.event.id}`);
    expect(pending).toHaveLength(51);
    expect(pending).toContain('index e49');
    expect(pending).not.toContain('index e48');
  });

  it('is compacted while running: its size follows what is undelivered, not the history', async () => {
    const path = journalPath();
    const compactAfterBytes = 16 * 1024;
    const journal = new BusJournal(path, { compactAfterBytes });
    await journal.recover();
    await journal.openForAppend();
    const sizes: number[] = [];
    for (let i = 0; i < 2_000; i++) {
      await journal.recordEvents([{ event: event(`e${i}`), targets }]);
      // Every event is delivered to both targets but the last five.
      if (i < 1_995)
        for (const t of targets) journal.recordDone({ event: event(`e${i}`), ...t, firstAttemptAt: 0 });
      if (i % 100 === 99) sizes.push(statSync(path).size);
    }
    await journal.close();

    // Unbounded it grows to about 2,000 * 400 bytes; compacted, it stays within twice the threshold.
    expect(Math.max(...sizes)).toBeLessThan(3 * compactAfterBytes);
    expect(journal.openEvents).toBe(5);
    const pending = (await new BusJournal(path).recover()).map((d) => `${d.consumer} ${d.event.id}`);
    expect(pending.sort()).toEqual(
      ['e1995', 'e1996', 'e1997', 'e1998', 'e1999'].flatMap((id) => [`index ${id}`, `notify ${id}`]).sort(),
    );
  });

  it('once closed, refuses an event (its EventId must not be answered) and drops a done line', async () => {
    const path = journalPath();
    const journal = new BusJournal(path);
    await journal.recover();
    await journal.openForAppend();
    const last = journal.recordEvents([{ event: event('kept'), targets }]);
    await journal.close();
    await last;

    await expect(journal.recordEvents([{ event: event('late'), targets }])).rejects.toThrow(/closed/);
    journal.recordDone({ event: event('kept'), ...index, firstAttemptAt: 0 });
    expect(lines(path).map((l) => l.event?.id ?? l.id)).toEqual(['kept']);
  });

  it('after a failed write it refuses every event until it has rewritten itself, then takes them again', async () => {
    const path = journalPath();
    // A disk that fills up in the middle of a write: part of it lands, then ENOSPC, and nothing
    // more fits (not even the rewrite) until the test frees it.
    let full = false;
    const enospc = () =>
      Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    const failures: unknown[] = [];
    const recovered = deferred<number>();
    const triedWhileFull = deferred();
    const journal = new BusJournal(path, {
      onFailure: (err) => failures.push(err),
      onRecovered: (downMs) => recovered.resolve(downMs),
      disk: {
        openAppend: async (p): Promise<JournalFile> => {
          if (full) throw enospc();
          const file = await open(p, 'a');
          return {
            appendFile: async (text) => {
              if (!full) return file.appendFile(text);
              await file.appendFile(String(text).slice(0, 40));
              throw enospc();
            },
            sync: () => file.sync(),
            close: () => file.close(),
          };
        },
        replace: async (p, lines) => {
          if (full) {
            triedWhileFull.resolve();
            throw enospc();
          }
          const { replaceDurablyAsync } = await import('../../infra/local/bus/durable-file');
          await replaceDurablyAsync(p, lines);
        },
      },
    });
    await journal.recover();
    await journal.openForAppend();
    await journal.recordEvents([{ event: event('before'), targets }]);
    full = true;

    await expect(journal.recordEvents([{ event: event('torn'), targets }])).rejects.toThrow(/ENOSPC/);
    // Before: this one was written after the torn fragment and answered; recovery then skipped
    // the glued line, and an event the relay had marked delivered was gone.
    await expect(journal.recordEvents([{ event: event('while full'), targets }])).rejects.toThrow(
      /the bus journal cannot write: ENOSPC/,
    );
    expect(journal.state).toMatchObject({ up: false, cause: expect.stringMatching(/ENOSPC/) });
    journal.retryNow();
    await triedWhileFull.promise; // the rewrite fails too while the disk is full
    full = false;
    journal.retryNow();
    await recovered.promise;
    await journal.recordEvents([{ event: event('after'), targets }]);
    await journal.close();

    expect(failures).toHaveLength(1);
    expect(journal.state).toEqual({ up: true });
    // No torn line, every answered event and none refused.
    expect(lines(path).map((l) => l.event?.id)).toEqual(['before', 'after']);
    expect((await new BusJournal(path).recover()).map((d) => d.event.id)).toEqual([
      'before',
      'before',
      'after',
      'after',
    ]);
    expect(existsSync(`${path}.tmp`)).toBe(false);
  });

  it('a rewrite that fits is no recovery: it refuses events until a write of recoveryBytes succeeds, and says so all along', async () => {
    const path = journalPath();
    // The fault as a full disk produces it: the rewrite of what is undelivered is small and
    // fits; the next events do not. Before, the journal took events again on that rewrite and
    // failed at the next write, once a second, while its status said up.
    let full = false;
    let free = 1 << 30;
    const enospc = () =>
      Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    const failures: unknown[] = [];
    const recoveries: number[] = [];
    const recovered = deferred();
    const probes: number[] = [];
    let looked = deferred();
    const journal = new BusJournal(path, {
      recoveryBytes: 64 * 1024,
      onFailure: (err) => failures.push(err),
      onRecovered: (downMs) => {
        recoveries.push(downMs);
        recovered.resolve();
      },
      disk: {
        openAppend: async (p): Promise<JournalFile> => {
          const file = await open(p, 'a');
          return {
            appendFile: async (text) => {
              if (full) throw enospc();
              return file.appendFile(text);
            },
            sync: () => file.sync(),
            close: () => file.close(),
          };
        },
        freeBytes: async () => {
          const seen = free;
          setImmediate(() => looked.resolve());
          return seen;
        },
        probe: async (_p, bytes) => {
          probes.push(bytes);
          if (full) throw enospc();
        },
      },
    });
    await journal.recover();
    await journal.openForAppend();
    full = true;
    free = 8 * 1024;
    await expect(journal.recordEvents([{ event: event('refused'), targets }])).rejects.toThrow(
      /^the bus journal cannot write: ENOSPC/,
    );

    // Too little room on the filesystem: it looks (no write) and stays down, saying how much.
    for (let i = 0; i < 3; i++) {
      looked = deferred();
      journal.retryNow();
      await looked.promise;
    }
    const short = journal.state;
    const probedWhileShort = probes.length;
    // Room, as statfs says, but the write does not fit (or the disk fails it): still down.
    free = 1 << 30;
    looked = deferred();
    journal.retryNow();
    await looked.promise;
    await expect(journal.recordEvents([{ event: event('still refused'), targets }])).rejects.toThrow(
      /the bus journal cannot write/,
    );
    const afterFailedProbe = journal.state;
    // The disk takes writes again.
    full = false;
    journal.retryNow();
    await recovered.promise;
    await journal.recordEvents([{ event: event('after'), targets }]);
    await journal.close();

    expect(short).toMatchObject({
      up: false,
      cause: expect.stringMatching(/ENOSPC.*8192 bytes free on its filesystem, 65536 needed/),
    });
    expect(probedWhileShort).toBe(0);
    expect(afterFailedProbe.up).toBe(false);
    // One probe refused while full (or more, if its own retry came meanwhile), one accepted.
    expect(probes.length).toBeGreaterThanOrEqual(2);
    expect(new Set(probes)).toEqual(new Set([64 * 1024]));
    expect(failures).toHaveLength(1);
    expect(recoveries).toHaveLength(1);
    expect(journal.state).toEqual({ up: true });
    expect(lines(path).map((l) => l.event?.id)).toEqual(['after']);
  });
});
