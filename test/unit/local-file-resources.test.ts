import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { FilePublisher } from '../../infra/local/consumer-resources/file-publisher';
import { FileWriteOnceStore } from '../../infra/local/consumer-resources/file-write-once-store';
import type { TopicMessage } from '../../shared/consumers/resources';
import { topicMessage } from '../support/topic-message-fixture';

let dataDir: string;

beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'local-effects-'));
  return () => rmSync(dataDir, { recursive: true, force: true });
});

describe('file publisher (the local stand-in for a topic)', () => {
  it('appends one JSON line per message to its file and skips an id it already has', async () => {
    const path = join(dataDir, 'notifications.jsonl');
    const publisher = new FilePublisher(path);
    const a = topicMessage();
    const b = topicMessage();
    expect(await publisher.publish(a)).toBe('sent');
    expect(await publisher.publish(b)).toBe('sent');
    expect(await new FilePublisher(path).publish(a)).toBe('duplicate');
    const lines = readFileSync(path, 'utf8').trim().split('\n');
    expect(lines.map((l) => JSON.parse(l) as TopicMessage)).toEqual([a, b]);
  });

  it('concurrent publishes of one message write one line', async () => {
    const path = join(dataDir, 'notifications.jsonl');
    const m = topicMessage();
    const outcomes = await Promise.all(Array.from({ length: 5 }, () => new FilePublisher(path).publish(m)));
    expect(outcomes.filter((o) => o === 'sent')).toHaveLength(1);
    expect(await new FilePublisher(path).read()).toHaveLength(1);
  });

  it('a line torn by a crash neither hides the next message nor breaks reading', async () => {
    const publisher = new FilePublisher(join(dataDir, 'notifications.jsonl'));
    await publisher.publish(topicMessage());
    appendFileSync(publisher.path, '{"id":"torn');
    const next = topicMessage();
    expect(await publisher.publish(next)).toBe('sent');
    expect((await publisher.read()).map((m) => m.id)).toContain(next.id);
  });

  it('cuts a subject as SNS takes one: one line, under 100 characters', async () => {
    const publisher = new FilePublisher(join(dataDir, 'notifications.jsonl'));
    await publisher.publish({ ...topicMessage(), subject: `Approved: ${'x'.repeat(200)}\nsecond line` });
    const [written] = await publisher.read();
    expect(written?.subject.length).toBeLessThan(100);
    expect(written?.subject).not.toContain('\n');
  });

  it('reads a file of notifications from before topics (one notification a line) as messages keyed by event', async () => {
    // A data directory of an older version: notify wrote each notification itself, keyed by `eventId`.
    const path = join(dataDir, 'notifications.jsonl');
    const old = { eventId: 'e-1', taskId: 't-1', version: 2, message: 'm' };
    writeFileSync(path, `${JSON.stringify(old)}\n`);
    const publisher = new FilePublisher(path);
    expect(await publisher.read()).toEqual([
      { id: 'e-1', group: '', subject: '', body: old, attributes: {} },
    ]);
    expect(await publisher.publish(topicMessage('e-1'))).toBe('duplicate');
    expect(await publisher.publish(topicMessage('e-2'))).toBe('sent');
    expect((await publisher.read()).map((m) => m.id)).toEqual(['e-1', 'e-2']);
  });
});

describe('file write-once store (the local stand-in for a bucket)', () => {
  it('writes under <root>/<key>, first write wins, no temporary files left', async () => {
    const store = new FileWriteOnceStore(join(dataDir, 'archive'));
    expect(await store.put('tasks/t/v2/e.json', 'first')).toBe('written');
    expect(await store.put('tasks/t/v2/e.json', 'second')).toBe('exists');
    expect(readFileSync(join(dataDir, 'archive', 'tasks/t/v2/e.json'), 'utf8')).toBe('first');
    expect(readdirSync(join(dataDir, 'archive', 'tasks/t/v2'))).toEqual(['e.json']);
  });

  it('of concurrent writes to one key exactly one is written', async () => {
    const store = new FileWriteOnceStore(join(dataDir, 'archive'));
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, (_, i) => store.put('tasks/t/v1/e.json', `write ${i}`)),
    );
    expect(outcomes.filter((o) => o === 'written')).toHaveLength(1);
  });

  it('refuses keys that would leave its directory', async () => {
    await expect(new FileWriteOnceStore(join(dataDir, 'archive')).put('../escape.json', 'x')).rejects.toThrow(
      'invalid object key',
    );
  });

  it('counts the objects stored, not the temporary files of a write under way', async () => {
    const root = join(dataDir, 'archive');
    const store = new FileWriteOnceStore(root);
    expect(await store.count()).toBe(0);
    await store.put('tasks/a/v1/e.json', '{}');
    await store.put('tasks/b/v1/e.json', '{}');
    await store.put('tasks/b/v1/e.json', '{}');
    writeFileSync(join(root, 'tasks/a/v1/f.json.0b5e.tmp'), '{');
    expect(await store.count()).toBe(2);
  });
});
