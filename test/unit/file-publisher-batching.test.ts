import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as fsPromises from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { FilePublisher } from '../../infra/local/consumer-resources/file-publisher';
import type { TopicMessage } from '../../shared/consumers/resources';
import { topicMessage } from '../support/topic-message-fixture';

// The real file operations, counted: how many appends a burst of publishes costs.
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  return { ...actual, appendFile: vi.fn(actual.appendFile) };
});

let path: string;

beforeEach(() => {
  const dataDir = mkdtempSync(join(tmpdir(), 'publisher-batching-'));
  path = join(dataDir, 'notifications.jsonl');
  vi.mocked(fsPromises.appendFile).mockClear();
  return () => rmSync(dataDir, { recursive: true, force: true });
});

describe('file publisher under a burst of publishes', () => {
  it('publishes that arrive while an append is under way are written together: 50 publishes, at most 2 appends', async () => {
    const publisher = new FilePublisher(path);
    const sent = Array.from({ length: 50 }, () => topicMessage());
    const outcomes = await Promise.all(sent.map((m) => publisher.publish(m)));
    expect(outcomes).toEqual(sent.map(() => 'sent'));
    expect(vi.mocked(fsPromises.appendFile).mock.calls.length).toBeLessThanOrEqual(2);
    const lines = readFileSync(path, 'utf8').trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as TopicMessage).id)).toEqual(sent.map((m) => m.id));
  });

  it('a duplicate inside one burst is written once and answered duplicate', async () => {
    const publisher = new FilePublisher(path);
    const first = topicMessage();
    const outcomes = await Promise.all([
      publisher.publish(topicMessage()),
      publisher.publish(first),
      publisher.publish(first),
      new FilePublisher(path).publish(first),
    ]);
    expect(outcomes).toEqual(['sent', 'sent', 'duplicate', 'duplicate']);
    expect((await publisher.read()).filter((m) => m.id === first.id)).toHaveLength(1);
  });

  it('a failed append rejects its publishes, the others go on, and retries write each once', async () => {
    const publisher = new FilePublisher(path);
    await publisher.publish(topicMessage());
    const burst = [topicMessage(), topicMessage(), topicMessage()];
    vi.mocked(fsPromises.appendFile).mockRejectedValueOnce(new Error('disk full'));
    const first = await Promise.allSettled(burst.map((m) => publisher.publish(m)));
    expect(first.filter((r) => r.status === 'rejected')).toHaveLength(1);
    const retried = await Promise.all(burst.map((m) => publisher.publish(m)));
    expect(retried.filter((o) => o === 'sent')).toHaveLength(1);
    const ids = (await publisher.read()).map((m) => m.id);
    expect(ids).toHaveLength(4);
    expect(new Set(ids).size).toBe(4);
  });
});
