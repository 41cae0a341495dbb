import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { FileSnapshotArchive } from '../../shared/effects/archive';
import { FileNotifier, type Notification } from '../../shared/effects/notify';
import { notification } from '../support/notification-fixture';

let dataDir: string;

beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'local-effects-'));
  return () => rmSync(dataDir, { recursive: true, force: true });
});

describe('file notifier (local notify adapter)', () => {
  it('appends one JSON line per event to notifications.jsonl and skips an event it already has', async () => {
    const notifier = new FileNotifier(dataDir);
    const a = notification();
    const b = notification();
    expect(await notifier.send(a)).toBe('sent');
    expect(await notifier.send(b)).toBe('sent');
    expect(await new FileNotifier(dataDir).send(a)).toBe('duplicate');
    expect(notifier.path).toBe(join(dataDir, 'notifications.jsonl'));
    const lines = readFileSync(notifier.path, 'utf8').trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as Notification).eventId)).toEqual([a.eventId, b.eventId]);
  });

  it('concurrent sends of one event write one line', async () => {
    const n = notification();
    const outcomes = await Promise.all(Array.from({ length: 5 }, () => new FileNotifier(dataDir).send(n)));
    expect(outcomes.filter((o) => o === 'sent')).toHaveLength(1);
    expect(await new FileNotifier(dataDir).read()).toHaveLength(1);
  });

  it('a line torn by a crash neither hides the next notification nor breaks reading', async () => {
    const notifier = new FileNotifier(dataDir);
    await notifier.send(notification());
    appendFileSync(notifier.path, '{"eventId":"torn');
    const next = notification();
    expect(await notifier.send(next)).toBe('sent');
    expect((await notifier.read()).map((n) => n.eventId)).toContain(next.eventId);
  });
});

describe('file snapshot archive (local archive adapter)', () => {
  it('writes under <dataDir>/archive/<key>, first write wins, no temporary files left', async () => {
    const archive = new FileSnapshotArchive(dataDir);
    expect(await archive.put('tasks/t/v2/e.json', 'first')).toBe('written');
    expect(await archive.put('tasks/t/v2/e.json', 'second')).toBe('exists');
    expect(readFileSync(join(dataDir, 'archive', 'tasks/t/v2/e.json'), 'utf8')).toBe('first');
    expect(readdirSync(join(dataDir, 'archive', 'tasks/t/v2'))).toEqual(['e.json']);
  });

  it('of concurrent writes to one key exactly one is written', async () => {
    const archive = new FileSnapshotArchive(dataDir);
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, (_, i) => archive.put('tasks/t/v1/e.json', `write ${i}`)),
    );
    expect(outcomes.filter((o) => o === 'written')).toHaveLength(1);
  });

  it('refuses keys that would leave the archive directory', async () => {
    await expect(new FileSnapshotArchive(dataDir).put('../escape.json', 'x')).rejects.toThrow(
      'invalid archive key',
    );
  });
});
