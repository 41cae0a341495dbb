import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as fsPromises from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { FileNotifier, type Notification } from '../../shared/effects/notify';
import { notification } from '../support/notification-fixture';

// The real file operations, counted: how many appends a burst of sends costs.
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  return { ...actual, appendFile: vi.fn(actual.appendFile) };
});

let dataDir: string;

beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'notifier-batching-'));
  vi.mocked(fsPromises.appendFile).mockClear();
  return () => rmSync(dataDir, { recursive: true, force: true });
});

describe('file notifier under a burst of sends', () => {
  it('sends that arrive while an append is under way are written together: 50 sends, at most 2 appends', async () => {
    const notifier = new FileNotifier(dataDir);
    const sent = Array.from({ length: 50 }, () => notification());
    const outcomes = await Promise.all(sent.map((n) => notifier.send(n)));
    expect(outcomes).toEqual(sent.map(() => 'sent'));
    expect(vi.mocked(fsPromises.appendFile).mock.calls.length).toBeLessThanOrEqual(2);
    const lines = readFileSync(notifier.path, 'utf8').trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as Notification).eventId)).toEqual(sent.map((n) => n.eventId));
  });

  it('a duplicate inside one burst is written once and answered duplicate', async () => {
    const notifier = new FileNotifier(dataDir);
    const first = notification();
    const outcomes = await Promise.all([
      notifier.send(notification()),
      notifier.send(first),
      notifier.send(first),
      new FileNotifier(dataDir).send(first),
    ]);
    expect(outcomes).toEqual(['sent', 'sent', 'duplicate', 'duplicate']);
    expect((await notifier.read()).filter((n) => n.eventId === first.eventId)).toHaveLength(1);
  });

  it('a failed append rejects its sends, the others go on, and retries write each once', async () => {
    const notifier = new FileNotifier(dataDir);
    await notifier.send(notification());
    const burst = [notification(), notification(), notification()];
    vi.mocked(fsPromises.appendFile).mockRejectedValueOnce(new Error('disk full'));
    const first = await Promise.allSettled(burst.map((n) => notifier.send(n)));
    expect(first.filter((r) => r.status === 'rejected')).toHaveLength(1);
    const retried = await Promise.all(burst.map((n) => notifier.send(n)));
    expect(retried.filter((o) => o === 'sent')).toHaveLength(1);
    const ids = (await notifier.read()).map((n) => n.eventId);
    expect(ids).toHaveLength(4);
    expect(new Set(ids).size).toBe(4);
  });
});
